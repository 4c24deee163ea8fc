"""Whose resource a request acts on: the caller's tenant, or the one an operator names."""

from __future__ import annotations

from filejobs.access import Caller
from filejobs.services.errors import InvalidRequestError, NotFoundError


def tenant_acted_for(caller: Caller, named: str | None, *, what: str) -> str:
    """A tenant acts on its own (naming another is answered as if it did not exist); an
    operator names the tenant `what` is for (422 without one)."""
    if caller.operator:
        if named is None:
            raise InvalidRequestError(f"tenant: an operator names the tenant {what} is for")
        return named
    if caller.tenant is None or named not in (None, caller.tenant):
        raise NotFoundError(f"no tenant {named!r}")
    return caller.tenant
