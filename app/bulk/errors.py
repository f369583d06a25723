"""The one error type of bulk jobs."""

from __future__ import annotations


class BulkError(ValueError):
    """A bulk job that cannot run as asked (bad input path, existing output, unknown model, missing extra…).

    The message is one line meant for the user; the CLI prints it and exits with status 2."""
