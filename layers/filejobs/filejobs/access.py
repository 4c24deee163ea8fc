"""Who is calling the API: a tenant (sees and changes only its own files and jobs) or an operator.

The identity comes from `requestContext.authorizer`, the context an API Gateway authorizer puts
on the request: `{"tenant": "<tenant>", "role": "tenant" | "operator"}`. The local stack sets
exactly that context on every request. The deployed API uses IAM auth (AWS_IAM), whose requests
carry no authorizer context: mapping an IAM principal to this context (a Lambda authorizer, or
a tag on the caller's role) is later work; until then a deployed request is answered 401.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The tenants of upload keys (`uploads/{tenant}/...`, domain/ingest.py): also safe in index keys.
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Caller:
    tenant: str | None  # None only for an operator who named no tenant
    operator: bool

    def may_see(self, tenant: str) -> bool:
        """Whether the caller may see (and change) what belongs to `tenant`."""
        return self.operator or tenant == self.tenant

    @property
    def name(self) -> str:
        """How the caller is recorded in `updated_by`, `cancelled_by`, `triggered_by`."""
        if self.operator:
            return "api:operator" if self.tenant is None else f"api:operator:{self.tenant}"
        return f"api:tenant:{self.tenant}"


def caller_from(event: dict[str, Any]) -> Caller | None:
    """The caller of an API Gateway (REST) event; None when its identity is missing or invalid."""
    context = event.get("requestContext")
    authorizer = context.get("authorizer") if isinstance(context, dict) else None
    if not isinstance(authorizer, dict):
        return None
    role, tenant = authorizer.get("role"), authorizer.get("tenant")
    if tenant is not None and not (isinstance(tenant, str) and _TENANT.match(tenant)):
        return None
    if role == "operator":
        return Caller(tenant=tenant, operator=True)
    if role == "tenant" and tenant is not None:
        return Caller(tenant=tenant, operator=False)
    return None
