"""Where the CLI's commands go: the local stack (`.filejobs/local.json`) or a deployed stack.

Target resolution is here and only here: `resolve_target` turns the command line's target
options (and FILEJOBS_STACK, FILEJOBS_API_URL, FILEJOBS_AS) into a `Target`: the API URL, how
requests are authenticated, and the clients of the AWS calls some commands make besides
(credentials.py says whose credentials each uses). `ApiClient` sends JSON requests to the
target's API, sends again those that can be (retries.py), and turns every failure into a
`CliError` that says what went wrong in the API's own words, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filejobs_cli.credentials import (
    Acting,
    StackAccess,
    acting_argument,
    aws_message,
    base_session,
)
from filejobs_cli.errors import CliError, HttpError, UsageError
from filejobs_cli.local_stack_file import CONFIG_PATH, LOCAL_CREDENTIALS, tenant_token
from filejobs_cli.retries import (
    LOST_IN_TRANSIT,
    RetryPolicy,
    repeatable_request,
    retried_status,
    retry_after_seconds,
)

__all__ = [
    "ApiClient",
    "BearerAuth",
    "CliError",
    "HttpError",
    "SigV4Auth",
    "Target",
    "UsageError",
    "add_target_options",
    "http_error",
    "local_target",
    "resolve_target",
    "stack_outputs",
]

# template.yaml's Outputs that the CLI reads from a deployed stack.
API_URL_OUTPUT = "ApiUrl"
UPLOADS_BUCKET_OUTPUT = "UploadsBucketName"
OUTPUTS_BUCKET_OUTPUT = "OutputsBucketName"
INGEST_QUEUE_OUTPUT = "IngestQueueUrl"
UPDATER_OUTPUT = "DefinitionsUpdaterName"
# The environment's word where the command line says nothing.
STACK_VARIABLE = "FILEJOBS_STACK"
API_URL_VARIABLE = "FILEJOBS_API_URL"
ACTING_VARIABLE = "FILEJOBS_AS"
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.")


@dataclass(frozen=True)
class BearerAuth:
    token: str

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass(frozen=True)
class SigV4Auth:
    """Signs each request (service "execute-api") with the credentials `session` gives: the
    session is asked for on the first request, so a role is assumed only when one is sent."""

    session: Callable[[], Any]  # a boto3.Session
    region: str

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth as BotocoreSigV4  # noqa: PLC0415
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415

        credentials = self.session().get_credentials()
        if credentials is None:
            raise CliError(
                "no AWS credentials to sign the API requests with: give --profile, or set "
                "AWS_PROFILE or AWS_ACCESS_KEY_ID (docs/CLI.md)"
            )
        headers = {"Content-Type": "application/json"} if body is not None else {}
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        BotocoreSigV4(credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(
            request
        )
        return dict(request.headers.items())


type Auth = BearerAuth | SigV4Auth


def _no_client(what: str) -> Callable[[], Any]:
    def refuse() -> Any:
        raise UsageError(f"this target gives no access to {what}: give --stack-name")

    return refuse


@dataclass(frozen=True)
class Target:
    description: str  # "the local stack" / "stack NAME" / the API URL
    api_url: str
    auth: Auth
    # The S3 client uploads (and an operator's backfill) use.
    s3_factory: Callable[[], Any]
    uploads_bucket: str | None
    outputs_bucket: str | None = None  # read by tools/demo.py; `get` downloads via the API
    # Where S3's upload notifications go (a backfill sends its records there too).
    ingest_queue_url: str | None = None
    sqs_factory: Callable[[], Any] = field(default_factory=lambda: _no_client("the queues"))
    # A deployed stack's definitions updater (the local one runs through the dev tools).
    lambda_factory: Callable[[], Any] = field(default_factory=lambda: _no_client("Lambda"))
    updater_name: str | None = None
    acting_of: Callable[[], Acting] = Acting  # whom the API sees: an operator, or a tenant
    local: bool = False

    def acting(self) -> Acting:
        return self.acting_of()

    def s3(self) -> Any:
        return self.s3_factory()

    def sqs(self) -> Any:
        return self.sqs_factory()

    def require_ingest_queue(self) -> str:
        if not self.ingest_queue_url:
            raise UsageError("no ingest queue: give --ingest-queue-url (or --stack-name)")
        return self.ingest_queue_url

    def require_outputs_bucket(self) -> str:
        if not self.outputs_bucket:
            raise UsageError("no outputs bucket: give --stack-name")
        return self.outputs_bucket

    def require_uploads_bucket(self) -> str:
        if not self.uploads_bucket:
            raise UsageError("no uploads bucket: give --uploads-bucket (or --stack-name)")
        return self.uploads_bucket


def add_target_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("target (default: the local stack of `filejobs dev`)")
    group.add_argument(
        "--stack-name",
        metavar="NAME",
        help=f"a deployed CloudFormation stack (default: ${STACK_VARIABLE})",
    )
    group.add_argument(
        "--api-url",
        metavar="URL",
        help=f"a deployed API's base URL, requests SigV4-signed with your credentials as they "
        f"are (default: ${API_URL_VARIABLE})",
    )
    group.add_argument(
        "--as",
        dest="acting",
        type=acting_argument,
        metavar="operator|tenant:NAME",
        help="call the API as an operator (default) or as one tenant: the CLI assumes the "
        f"stack's API role itself (default: ${ACTING_VARIABLE})",
    )
    group.add_argument("--profile", help="the AWS profile of your credentials (a deployed stack)")
    group.add_argument("--region", help="the AWS region of a deployed stack")
    group.add_argument("--uploads-bucket", metavar="BUCKET", help="with --api-url: uploads go here")
    group.add_argument(
        "--ingest-queue-url", metavar="URL", help="with --api-url: the ingest queue (backfill)"
    )


def _chosen(arguments: argparse.Namespace, name: str) -> str | None:
    value = getattr(arguments, name, None)
    return str(value) if value else None


def target_names(arguments: argparse.Namespace) -> tuple[str | None, str | None]:
    """(stack name, API URL): the command line's, else the environment's; never both."""
    stack, url = _chosen(arguments, "stack_name"), _chosen(arguments, "api_url")
    if stack and url:
        raise UsageError("give --stack-name or --api-url, not both")
    if stack or url:
        return stack, url
    stack, url = os.environ.get(STACK_VARIABLE) or None, os.environ.get(API_URL_VARIABLE) or None
    if stack and url:
        raise UsageError(f"${STACK_VARIABLE} and ${API_URL_VARIABLE} are both set: unset one")
    return stack, url


def requested_acting(arguments: argparse.Namespace) -> Acting | None:
    """--as, else $FILEJOBS_AS, else None (the target's default)."""
    given = getattr(arguments, "acting", None)
    if isinstance(given, Acting):
        return given
    from_environment = os.environ.get(ACTING_VARIABLE)
    if not from_environment:
        return None
    try:
        return acting_argument(from_environment)
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"${ACTING_VARIABLE}: {error}") from None


def resolve_target(arguments: argparse.Namespace, project_root: Callable[[], Path]) -> Target:
    stack_name, api_url = target_names(arguments)
    acting = requested_acting(arguments)
    profile, region = _chosen(arguments, "profile"), _chosen(arguments, "region")
    if stack_name:
        return stack_target(stack_name, profile, region, acting)
    if api_url:
        if acting is not None:
            raise UsageError(
                "--as (or $FILEJOBS_AS) assumes the stack's API role, whose ARN is a stack "
                "output: give --stack-name instead of --api-url"
            )
        return api_url_target(
            api_url,
            profile,
            region,
            _chosen(arguments, "uploads_bucket"),
            _chosen(arguments, "ingest_queue_url"),
        )
    return local_target(project_root(), acting)


def local_target(root: Path, acting: Acting | None = None) -> Target:
    config_path = root / CONFIG_PATH
    if not config_path.is_file():
        raise CliError(
            f"the local stack is not running: no {CONFIG_PATH} in {root} "
            "(start it with `filejobs dev`, or target a deployed stack with --stack-name)"
        )
    try:
        config = json.loads(config_path.read_text())
        endpoint_url, region = str(config["endpoint_url"]), str(config["region"])
        served_apart = {str(k): str(v) for k, v in (config.get("endpoints") or {}).items()}
        api_url, token = str(config["api_url"]), str(config["api_token"])
    except (ValueError, KeyError, TypeError) as error:
        raise CliError(f"{config_path} is not a local stack's config ({error})") from None
    acting = acting or Acting()
    if acting.tenant is not None:
        secret = config.get("token_secret")
        if not secret:
            raise CliError(f"{config_path} has no token secret (restart `filejobs dev`)")
        token = tenant_token(str(secret), acting.tenant)

    def client(service: str) -> Callable[[], Any]:
        def make() -> Any:
            import boto3  # noqa: PLC0415 (slow import, only when a client is used)

            return boto3.client(
                service,  # type: ignore[call-overload]
                endpoint_url=served_apart.get(service, endpoint_url),
                region_name=region,
                aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )

        return make

    refs = (config.get("resources") or {}).get("refs") or {}
    return Target(
        description=f"the local stack at {api_url}",
        api_url=api_url,
        auth=BearerAuth(token),
        s3_factory=client("s3"),
        uploads_bucket=config.get("uploads_bucket"),
        outputs_bucket=config.get("outputs_bucket"),
        ingest_queue_url=refs.get("IngestQueue"),
        sqs_factory=client("sqs"),
        acting_of=lambda: acting,
        local=True,
    )


def stack_outputs(session: Any, stack_name: str) -> dict[str, str]:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError  # noqa: PLC0415

    try:
        answer = session.client("cloudformation").describe_stacks(StackName=stack_name)
    except NoCredentialsError:
        raise CliError(
            "no AWS credentials found: give --profile, or set AWS_PROFILE or AWS_ACCESS_KEY_ID "
            "(docs/CLI.md)"
        ) from None
    except (ClientError, BotoCoreError) as error:
        raise CliError(f"stack {stack_name}: {aws_message(error)}") from None
    stacks = answer.get("Stacks") or []
    if not stacks:
        raise CliError(f"no stack {stack_name}")
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs") or []}


def stack_target(
    stack_name: str, profile: str | None, region: str | None, acting: Acting | None
) -> Target:
    base = base_session(profile, region)
    outputs = stack_outputs(base, stack_name)
    if not outputs.get(API_URL_OUTPUT):
        raise CliError(f"stack {stack_name} has no output {API_URL_OUTPUT}")
    access = StackAccess(base, stack_name, outputs, acting)
    api_url = outputs[API_URL_OUTPUT]
    return Target(
        description=f"stack {stack_name}",
        api_url=api_url,
        auth=SigV4Auth(lambda: access.api_session, _region_of(api_url, base)),
        s3_factory=lambda: access.upload_session().client("s3"),
        uploads_bucket=outputs.get(UPLOADS_BUCKET_OUTPUT),
        outputs_bucket=outputs.get(OUTPUTS_BUCKET_OUTPUT),
        ingest_queue_url=outputs.get(INGEST_QUEUE_OUTPUT),
        sqs_factory=lambda: access.operator_session("backfill").client("sqs"),
        lambda_factory=lambda: access.operator_session("definitions").client("lambda"),
        updater_name=outputs.get(UPDATER_OUTPUT),
        # --as's, known with no request; else whose session the credentials are (STS).
        acting_of=lambda: access.acting,
    )


def api_url_target(
    api_url: str,
    profile: str | None,
    region: str | None,
    uploads_bucket: str | None,
    ingest_queue_url: str | None = None,
) -> Target:
    if urllib.parse.urlsplit(api_url).scheme not in {"http", "https"}:
        raise UsageError(f"--api-url must be an http(s) URL, got {api_url!r}")
    session = base_session(profile, region)
    return Target(
        description=api_url,
        api_url=api_url,
        auth=SigV4Auth(lambda: session, _region_of(api_url, session)),
        s3_factory=lambda: session.client("s3"),
        uploads_bucket=uploads_bucket,
        ingest_queue_url=ingest_queue_url,
        sqs_factory=lambda: session.client("sqs"),
    )


def _region_of(api_url: str, session: Any) -> str:
    host = urllib.parse.urlsplit(api_url).hostname or ""
    match = _EXECUTE_API_HOST.match(host)
    if match:
        return match.group(1)
    region = session.region_name
    if not region:
        raise UsageError("cannot tell the API's region: give --region")
    return str(region)


class ApiClient:
    """JSON over HTTP to the target's API, each request sent again while retries.py says so."""

    def __init__(
        self, target: Target, timeout: float = 30.0, retry: RetryPolicy | None = None
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.retry = retry or RetryPolicy()

    def get(self, path: str, query: Mapping[str, str | None] | None = None) -> Any:
        return self.request("GET", path, query=query)

    def post(
        self,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        *,
        repeatable: bool | None = None,
    ) -> Any:
        return self.request("POST", path, body=body, headers=headers, repeatable=repeatable)

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | None] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        *,
        repeatable: bool | None = None,
    ) -> Any:
        """The answer's JSON. `repeatable` says whether sending it twice is harmless (None:
        GET, HEAD and requests with an Idempotency-Key are; retries.py)."""
        url = self.target.api_url.rstrip("/") + path
        pairs = {k: v for k, v in (query or {}).items() if v is not None}
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        data = None if body is None else json.dumps(body).encode()
        again = repeatable_request(method, headers or {}, repeatable)
        attempt = 1
        while True:
            try:
                raw = self._send(method, url, data, headers or {})
            except _RetryableError as failure:
                wait = self.retry.wait_before_next(attempt, failure.retry_after)
                if wait is None or not (failure.not_processed or again):
                    raise failure.error from None
                self.retry.sleep(wait)
                attempt += 1
                continue
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                raise CliError(
                    f"the API answered {method} {path} with something not JSON"
                ) from None

    def _send(self, method: str, url: str, data: bytes | None, extra: Mapping[str, str]) -> bytes:
        # Signed afresh each attempt (SigV4 dates its signature); extra headers such as
        # Idempotency-Key travel unsigned.
        headers = {**extra, **self.target.auth.headers(method, url, data)}
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        # http(s) only: the URL comes from local.json, a stack output or a checked --api-url.
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                return bytes(answer.read())
        except urllib.error.HTTPError as error:
            failure = http_error(error.code, error.read())
            after = retry_after_seconds(error.headers.get("Retry-After"))
            if retried_status(error.code, is_repeatable=True):
                raise _RetryableError(failure, after, not_processed=error.code == 429) from None
            raise failure from None
        except LOST_IN_TRANSIT as error:
            raise _RetryableError(self._unreachable(error), None, not_processed=False) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, LOST_IN_TRANSIT):
                raise _RetryableError(self._unreachable(error), None, not_processed=False) from None
            raise self._unreachable(error) from None
        except ConnectionError as error:
            raise self._unreachable(error) from None

    def _unreachable(self, error: BaseException) -> CliError:
        reason = getattr(error, "reason", error)
        hint = "is it running? (`filejobs dev` starts the local stack)" if self.target.local else ""
        return CliError(
            f"{self.target.description} is not reachable ({reason}); {hint}".rstrip("; ")
        )


class _RetryableError(Exception):
    """A failure another attempt may fix: `error` is what is reported when none is made."""

    def __init__(self, error: CliError, retry_after: float | None, *, not_processed: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after
        self.not_processed = not_processed


def http_error(status: int, raw: bytes) -> HttpError:
    """The API's {"error": {"code", "message"}}, or what can be said without it."""
    code, message = "http_error", f"the API answered HTTP {status}"
    try:
        error = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
    else:
        try:
            gateway = json.loads(raw).get("message")  # API Gateway's own {"message": ...}
        except (ValueError, AttributeError):
            gateway = None
        if isinstance(gateway, str):
            message = f"{message}: {gateway}"
    return HttpError(status, code, message)
