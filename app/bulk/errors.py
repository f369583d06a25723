"""The one error type of bulk jobs."""

from __future__ import annotations


class BulkError(ValueError):
    """A bulk job that cannot run as asked (bad input path, existing output, unknown model, missing extra…).

    The message is one line meant for the user; the CLI prints it and exits with status 2."""


class ChunkError(BulkError):
    """A chunk that could not be processed (an unreadable file, a corrupt row group): names the chunk and the
    cause. Raised inside a worker; Ray does not retry it (a retry would fail the same way) and the job stops."""
