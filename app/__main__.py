"""``python -m app`` — the command-line interface (see :mod:`app.cli`)."""

from app.cli import main

raise SystemExit(main())
