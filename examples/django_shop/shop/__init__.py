"""A Django project whose views enqueue tasuki jobs and whose worker is a management command.

python manage.py runserver              # the web process
python manage.py tasuki_worker -c 8     # the worker process, beside it
"""
