"""Whose credentials each AWS call of the CLI is made with, on a deployed stack.

One base credential is all a CLI user needs: a profile (`--profile`), the environment's keys,
or an instance role. With it the CLI reads the stack's outputs (cloudformation:DescribeStacks)
and assumes the stack's API role itself (sts:AssumeRole), once per run:

- `--as operator` (the default): ApiOperatorRole, session name "filejobs-cli";
- `--as tenant:NAME`: ApiTenantRole with the role session name NAME, the tenant the API sees,
  and the session tag tenant=NAME, which IAM checks against the name on every API call.

When the base credentials already are a session of one of the stack's API roles (a backend
that assumed the tenant role for its user, a profile that assumes the operator role) and no
other `--as` is asked for, they are used as they are.

The API is always called with the API role's credentials. The operator's other AWS calls
(uploads, backfill's listing and queue, the definitions updater) are the operator role's too:
the template grants them to it (ApiOperatorCliPolicy). A tenant's uploads are the base
credentials' own, since IAM cannot scope a role to the tenant its session names: the tenant's
principal needs s3:PutObject on uploads/TENANT/* (docs/CLI.md, "IAM policy").
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from filejobs_cli.errors import CliError, UsageError

OPERATOR_ROLE_OUTPUT = "ApiOperatorRoleArn"
TENANT_ROLE_OUTPUT = "ApiTenantRoleArn"
OPERATOR_SESSION_NAME = "filejobs-cli"
# The role's longest session (template.yaml MaxSessionDuration): long uploads stay signed.
SESSION_SECONDS = 3600
# A tenant as the API knows one (filejobs/domain/keys.py TENANT_PATTERN).
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
# arn:aws:sts::123456789012:assumed-role/<role name>/<session name>
_ASSUMED_ROLE = re.compile(
    r"arn:aws[a-z-]*:sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/(?P<session>[^/]+)"
)
# arn:aws:iam::123456789012:role/<path/>name
_ROLE = re.compile(r"arn:aws[a-z-]*:iam::(?P<account>\d{12}):role/(?:.*/)?(?P<name>[^/]+)")


@dataclass(frozen=True)
class Acting:
    """Whom the CLI calls the API as: an operator (tenant None) or one tenant."""

    tenant: str | None = None

    @property
    def operator(self) -> bool:
        return self.tenant is None

    def __str__(self) -> str:
        return "operator" if self.tenant is None else f"tenant:{self.tenant}"


def acting_argument(value: str) -> Acting:
    """`operator` or `tenant:NAME` (--as, FILEJOBS_AS)."""
    if value == "operator":
        return Acting()
    kind, _, tenant = value.partition(":")
    if kind == "tenant" and _TENANT.fullmatch(tenant):
        return Acting(tenant)
    raise argparse.ArgumentTypeError(
        f"expected operator or tenant:NAME (NAME: 1-63 letters, digits, '-' or '_'), got {value!r}"
    )


def base_session(profile: str | None, region: str | None) -> Any:
    """The caller's own credentials: the profile given, else boto3's usual chain."""
    import boto3  # noqa: PLC0415 (slow import, only for a deployed stack)
    from botocore.exceptions import ProfileNotFound  # noqa: PLC0415

    try:
        return boto3.Session(profile_name=profile, region_name=region)
    except ProfileNotFound:
        raise UsageError(f"no AWS profile {profile!r} (--profile)") from None


def aws_message(error: BaseException) -> str:
    """What AWS said, in its own words, else the error's text."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        message = response.get("Error", {}).get("Message")
        if message:
            return str(message)
    return str(error) or type(error).__name__


class StackAccess:
    """The credentials of one CLI run on one deployed stack (each obtained at most once)."""

    def __init__(
        self, base: Any, stack_name: str, outputs: dict[str, str], requested: Acting | None
    ) -> None:
        self.base = base
        self.stack_name = stack_name
        self.outputs = outputs
        self.requested = requested

    @cached_property
    def caller_arn(self) -> str:
        """Who the base credentials are (sts:GetCallerIdentity needs no permission)."""
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            return str(self.base.client("sts").get_caller_identity()["Arn"])
        except (ClientError, BotoCoreError) as error:
            raise CliError(
                f"cannot tell who your AWS credentials are: {aws_message(error)}"
            ) from None

    @cached_property
    def current(self) -> Acting | None:
        """The API role the base credentials are already a session of, if any."""
        found = _ASSUMED_ROLE.fullmatch(self.caller_arn)
        if found is None:
            return None
        for output, acting in (
            (OPERATOR_ROLE_OUTPUT, Acting()),
            (TENANT_ROLE_OUTPUT, Acting(found["session"])),
        ):
            role = _ROLE.fullmatch(self.outputs.get(output, ""))
            if role and (role["account"], role["name"]) == (found["account"], found["role"]):
                return acting
        return None

    @cached_property
    def acting(self) -> Acting:
        if self.requested is not None:
            return self.requested
        return self.current or Acting()

    @cached_property
    def api_session(self) -> Any:
        """The session the API is called with: the base one when it already is the role's."""
        if self.current == self.acting:
            return self.base
        return self._assumed(self.acting)

    def upload_session(self) -> Any:
        """An operator uploads as the operator role; a tenant with the base credentials."""
        return self.api_session if self.acting.operator else self.base

    def operator_session(self, command: str) -> Any:
        if not self.acting.operator:
            raise UsageError(f"{command} is an operator's command; you act as {self.acting}")
        return self.api_session

    def _assumed(self, acting: Acting) -> Any:
        import boto3  # noqa: PLC0415
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        output = OPERATOR_ROLE_OUTPUT if acting.operator else TENANT_ROLE_OUTPUT
        role_arn = self.outputs.get(output)
        if not role_arn:
            parameter = "ApiOperatorPrincipals" if acting.operator else "ApiTenantBrokers"
            raise CliError(
                f"stack {self.stack_name} has no output {output}: it makes that role only for "
                f"the principals its parameter {parameter} names (docs/API_AUTH.md)"
            )
        if acting.tenant is not None and len(acting.tenant) < 2:
            raise UsageError(
                f"tenant {acting.tenant!r}: STS takes role session names of 2-64 characters, "
                "so a one-character tenant cannot be acted as with the tenant role"
            )
        try:
            answer = self.base.client("sts").assume_role(
                RoleArn=role_arn,
                RoleSessionName=acting.tenant or OPERATOR_SESSION_NAME,
                DurationSeconds=SESSION_SECONDS,
                **_tenant_tag(acting.tenant),
            )
        except (ClientError, BotoCoreError) as error:
            # the operator role asks for MFA unless the stack turned it off (template.yaml)
            mfa = ", from an MFA sign-in (ApiOperatorRequiresMfa)" if acting.operator else ""
            raise CliError(
                f"cannot act as {acting} on stack {self.stack_name}: {aws_message(error)} "
                f"(your credentials need sts:AssumeRole on {role_arn}{mfa}: docs/CLI.md, "
                "IAM policy)"
            ) from None
        issued = answer["Credentials"]
        return boto3.Session(
            aws_access_key_id=issued["AccessKeyId"],
            aws_secret_access_key=issued["SecretAccessKey"],
            aws_session_token=issued["SessionToken"],
            region_name=self.base.region_name,
        )


def _tenant_tag(tenant: str | None) -> dict[str, Any]:
    """A tenant session's tag "tenant" (template.yaml ApiTenantCallersPolicy: without it, or with
    another tenant than the session name, the session may call nothing)."""
    return {} if tenant is None else {"Tags": [{"Key": "tenant", "Value": tenant}]}
