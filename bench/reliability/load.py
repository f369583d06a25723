"""``python -m bench.reliability.load``: the load generator of :mod:`harness.load` (shared with the tests) run
against a service that is already up; prints a JSON report. ``--help`` lists the options."""

from harness.load import main

if __name__ == "__main__":
    raise SystemExit(main())
