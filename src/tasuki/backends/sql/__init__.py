"""The shared layer of the SQL backends (SQLite, PostgreSQL): see `backend` for the map."""
