"""`python -m tests.chaos ...`: see `tests.chaos.runner`."""

from tests.chaos.runner import main

raise SystemExit(main())
