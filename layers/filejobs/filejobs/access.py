"""Who is calling the API: a tenant (sees and changes only its own files and jobs) or an operator.

Three sources, the first present wins:
- `requestContext.authorizer.claims`, the claims of a Cognito user pool authorizer (the
  documented alternative to IAM, docs/API_AUTH.md), every value a string: the tenant is the
  user's `custom:tenant` attribute, and a member of the group API_OPERATOR_GROUP ("operators"
  unless set) is an operator. A REST API's Cognito authorizer takes an ID token of any app
  client of the pool: on the stack's own Cognito API (ApiAuth=COGNITO), whose stage variable
  `consoleClientId` names the console's client, only an ID token issued to that client is
  taken (`aud`, `token_use`), so another app client of a shared pool opens nothing.
- `requestContext.authorizer`, the context a Lambda authorizer puts on the request:
  `{"tenant": "<tenant>", "role": "tenant" | "operator"}`. The local stack's router sets it from
  its bearer tokens.
- IAM auth (the deployed default): `requestContext.identity.userArn` of a caller that assumed
  one of the stack's API roles (template.yaml): `.../assumed-role/<API_OPERATOR_ROLE>/<any>` is an
  operator, `.../assumed-role/<API_TENANT_ROLE>/<tenant>` is that tenant (the session name),
  when the ARN's account is this stack's (API_ACCOUNT_ID) and `identity.user` names the role's
  unique id (API_*_ROLE_ID). Any other IAM principal is refused: being allowed to sign a
  request is not a tenancy. The tenant's session tag (`tenant`) is not read here: API Gateway
  puts no session tag in the request. IAM checks it instead, before the function runs: the
  tenant role may call the API only when its session name is its tag (template.yaml
  ApiTenantCallersPolicy), so the name read here is the tag. Where no principals are named the
  stack makes no such role, API_*_ROLE are empty, and no IAM caller is recognised.

And one that is never present in AWS: under `sam local` (start-api or invoke), which checks no IAM
signature and gives the function no caller, a request with no identity of its own may name one
in the header X-Filejobs-Local-Caller (`operator`, `operator:TENANT` or `tenant:TENANT`). It is
read only when SAM's container says it is SAM's (AWS_SAM_LOCAL=true, which Lambda never sets)
AND the function's environment says it runs against the local stack
(FILEJOBS_LOCAL_CALLERS=header, which only the local stack's `.filejobs/sam-env.json` and
`filejobs invoke` set; the template declares it empty, so a deployed function has it off).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from filejobs.config import (
    LOCAL_CALLERS_BY_HEADER,
    LOCAL_CALLERS_VARIABLE,
    SAM_LOCAL_VARIABLE,
    CallerSettings,
)
from filejobs.domain.keys import is_tenant

# The switch's variables are read in config.py; the local stack names them from here.
__all__ = [
    "LOCAL_CALLERS_BY_HEADER",
    "LOCAL_CALLERS_VARIABLE",
    "LOCAL_CALLER_HEADER",
    "NO_STACK_CALLERS",
    "SAM_LOCAL_VARIABLE",
    "Caller",
    "caller_from",
]

# arn:aws:sts::123456789012:assumed-role/<role name>/<session name>
_ASSUMED_ROLE = re.compile(
    r"^arn:aws[a-z-]*:sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/(?P<session>[^/]+)$"
)


# The local-caller header (module docstring); the two variables that turn it on are read by
# config.CallerSettings.
LOCAL_CALLER_HEADER = "X-Filejobs-Local-Caller"
# Whom a caller is recognised by when the function is given nothing: no IAM role, no header.
NO_STACK_CALLERS = CallerSettings()


@dataclass(frozen=True)
class Caller:
    tenant: str | None  # None only for an operator who named no tenant
    operator: bool
    # What acts with this caller's rights, when not a person through the API (a schedule's run:
    # "schedule:<id>"): recorded as the caller's name.
    agent: str | None = None

    def may_see(self, tenant: str) -> bool:
        """Whether the caller may see (and change) what belongs to `tenant`."""
        return self.operator or tenant == self.tenant

    @property
    def name(self) -> str:
        """How the caller is recorded in `updated_by`, `cancelled_by`, `triggered_by`."""
        if self.agent is not None:
            return self.agent
        if self.operator:
            return "api:operator" if self.tenant is None else f"api:operator:{self.tenant}"
        return f"api:tenant:{self.tenant}"


def caller_from(
    event: dict[str, Any], recognised: CallerSettings = NO_STACK_CALLERS
) -> Caller | None:
    """The caller of an API Gateway (REST) event; None when its identity is missing or invalid.
    `recognised`: the function's CallerSettings (the stack's roles, operator group, switches)."""
    context = event.get("requestContext")
    if not isinstance(context, dict):
        return None
    authorizer = context.get("authorizer")
    if isinstance(authorizer, dict) and isinstance(authorizer.get("claims"), dict):
        audience = _required_audience(event)
        if audience is not None and not _issued_to(authorizer["claims"], audience):
            return None
        return _from_claims(authorizer["claims"], recognised)
    if isinstance(authorizer, dict) and ("role" in authorizer or "tenant" in authorizer):
        return _from_authorizer(authorizer)
    return _from_identity(event, context.get("identity"), recognised)


def _from_identity(
    event: dict[str, Any], identity: object, recognised: CallerSettings
) -> Caller | None:
    """An IAM signer's caller; with no signer, the local-caller header's, where it is read."""
    if isinstance(identity, dict) and _names_a_signer(identity):
        return _from_iam(identity, recognised)
    if recognised.local_callers:
        return _local_caller(event)
    return None


def _names_a_signer(identity: dict[str, Any]) -> bool:
    """Whether the request was signed by someone: API Gateway fills these for every IAM caller;
    `sam local start-api` sends them all null."""
    return any(identity.get(field) for field in ("userArn", "user", "caller"))


def _local_caller(event: dict[str, Any]) -> Caller | None:
    """The caller the local-caller header names; None for none, several or a malformed one."""
    values = _header_values(event, LOCAL_CALLER_HEADER)
    if len(values) != 1:
        return None  # two headers that disagree name no one
    role, colon, tenant = values.pop().partition(":")
    if role == "operator" and not colon:
        return Caller(tenant=None, operator=True)
    if role in ("operator", "tenant") and is_tenant(tenant):
        return Caller(tenant=tenant, operator=role == "operator")
    return None


def _header_values(event: dict[str, Any], name: str) -> set[str]:
    """Every value of a header, whatever its case, from `headers` and `multiValueHeaders` (API
    Gateway and SAM send both; either may be null)."""
    wanted = name.lower()
    found: set[str] = set()
    headers, multi = event.get("headers"), event.get("multiValueHeaders")
    for key, value in headers.items() if isinstance(headers, dict) else ():
        if isinstance(key, str) and key.lower() == wanted and isinstance(value, str):
            found.add(value)
    for key, values in multi.items() if isinstance(multi, dict) else ():
        if isinstance(key, str) and key.lower() == wanted and isinstance(values, list):
            found.update(value for value in values if isinstance(value, str))
    return found


def _required_audience(event: dict[str, Any]) -> str | None:
    """The app client whose ID tokens the API that took the request accepts: its stage's
    `consoleClientId` (stage variables come from the stage, never from the caller); None on an
    API that names none (an HTTP API's JWT authorizer checks the audience itself)."""
    variables = event.get("stageVariables")
    client = variables.get("consoleClientId") if isinstance(variables, dict) else None
    return client if isinstance(client, str) and client else None


def _issued_to(claims: dict[str, Any], audience: str) -> bool:
    """Whether the claims are an ID token's (an access token carries no custom attributes,
    and names its client otherwise) issued to `audience`."""
    return claims.get("token_use") == "id" and claims.get("aud") == audience


def _from_authorizer(authorizer: dict[str, Any]) -> Caller | None:
    role, tenant = authorizer.get("role"), authorizer.get("tenant")
    if tenant is not None and not (isinstance(tenant, str) and is_tenant(tenant)):
        return None
    if role == "operator":
        return Caller(tenant=tenant, operator=True)
    if role == "tenant" and tenant is not None:
        return Caller(tenant=tenant, operator=False)
    return None


def _from_claims(claims: dict[str, Any], recognised: CallerSettings) -> Caller | None:
    tenant = claims.get("custom:tenant")
    if tenant is not None and not (isinstance(tenant, str) and is_tenant(tenant)):
        return None
    if recognised.operator_group in _groups(claims.get("cognito:groups")):
        return Caller(tenant=tenant, operator=True)
    if tenant is not None:
        return Caller(tenant=tenant, operator=False)
    return None


def _groups(claim: object) -> set[str]:
    """API Gateway hands a token's group list over as one string: "a,b" from a REST API's
    Cognito authorizer, "[a b]" from an HTTP API's JWT authorizer."""
    if not isinstance(claim, str):
        return set()
    return set(re.split(r"[,\s]+", claim.strip().strip("[]"))) - {""}


def _from_iam(identity: dict[str, Any], recognised: CallerSettings) -> Caller | None:
    arn = identity.get("userArn")
    match = _ASSUMED_ROLE.match(arn) if isinstance(arn, str) else None
    if match is None or match["account"] != recognised.account_id:
        return None
    role, session = match["role"], match["session"]
    operator = (recognised.operator_role, recognised.operator_role_id)
    if _is_role(identity, role, session, *operator):
        return Caller(tenant=None, operator=True)
    tenant = (recognised.tenant_role, recognised.tenant_role_id)
    if _is_role(identity, role, session, *tenant) and is_tenant(session):
        return Caller(tenant=session, operator=False)
    return None


def _is_role(
    identity: dict[str, Any], role: str, session: str, name: str | None, role_id: str | None
) -> bool:
    """Whether the signer assumed the stack's role `name` (API_*_ROLE) of unique id `role_id`
    (API_*_ROLE_ID), which API Gateway puts in `user` as `<role id>:<session>`. A role deleted
    and made again under the name has another id, so a name alone is not enough."""
    if not name or not role_id:
        return False
    return role == name and identity.get("user") == f"{role_id}:{session}"
