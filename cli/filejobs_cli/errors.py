"""The CLI's failures: each is one line on stderr and an exit status, never a traceback."""

from __future__ import annotations


class CliError(Exception):
    """A failure the CLI reports as one line on stderr, with its exit status."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class HttpError(CliError):
    """A non-2xx answer of the API, with its {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
