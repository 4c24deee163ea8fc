"""Why a use case refused a request, said in the caller's terms (never a trace).

The services raise these; the status API answers each with its HTTP status (filejobs/api/
rendering.py), so no service knows HTTP.
"""

from __future__ import annotations

from filejobs.domain.quotas import SpentQuota


class RequestRefusedError(Exception):
    def __init__(self, message: str, *, log: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.log = log  # what the handler logs, when more telling than the kind of refusal


class MalformedRequestError(RequestRefusedError):
    """The request cannot be read: not JSON, an id that is not a UUID, an unknown filter value,
    a page token that is not this listing's."""


class InvalidRequestError(RequestRefusedError):
    """The request reads well but asks for something that is not allowed (a field out of
    range, an unknown field, a reserved input)."""


class UnidentifiedCallerError(RequestRefusedError):
    """The request carries no caller identity the service trusts."""


class ForbiddenError(RequestRefusedError):
    """The caller is known, and the request is not its to make (an operator's power)."""


class NotFoundError(RequestRefusedError):
    """No such thing for this caller: another tenant's answers exactly so."""


class ConflictError(RequestRefusedError):
    """The thing is not in a state that allows the request."""


class QuotaExceededError(RequestRefusedError):
    """The tenant (or the file) has used what a quota allows for now: the request may be made
    again after `retry_after` seconds (the API's 429 with Retry-After)."""

    def __init__(self, message: str, *, spent: SpentQuota, retry_after: int) -> None:
        super().__init__(message, log=f"quota spent: {spent.value}")
        self.spent = spent
        self.retry_after = retry_after
