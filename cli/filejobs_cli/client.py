"""Where the CLI's commands go: the local stack (`.filejobs/local.json`) or a deployed stack.

Target resolution is here and only here: `resolve_target` turns the command line's target
options into a `Target` (API URL, how requests are authenticated, an S3 client factory, the
buckets). `ApiClient` sends JSON requests to the target's API and turns every failure into a
`CliError` that says what went wrong in the API's own words, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filejobs_cli.local_stack_file import CONFIG_PATH, LOCAL_CREDENTIALS

# template.yaml's Outputs that the CLI reads from a deployed stack.
API_URL_OUTPUT = "ApiUrl"
UPLOADS_BUCKET_OUTPUT = "UploadsBucketName"
OUTPUTS_BUCKET_OUTPUT = "OutputsBucketName"
INGEST_QUEUE_OUTPUT = "IngestQueueUrl"
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.")


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


@dataclass(frozen=True)
class BearerAuth:
    token: str

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass(frozen=True)
class SigV4Auth:
    """Signs each request with the caller's AWS credentials (service "execute-api")."""

    session: Any  # boto3.Session
    region: str

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth as BotocoreSigV4  # noqa: PLC0415
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415

        credentials = self.session.get_credentials()
        if credentials is None:
            raise CliError("no AWS credentials found to sign the API requests with")
        headers = {"Content-Type": "application/json"} if body is not None else {}
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        BotocoreSigV4(credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(
            request
        )
        return dict(request.headers.items())


type Auth = BearerAuth | SigV4Auth


@dataclass(frozen=True)
class Target:
    description: str  # "the local stack" / "stack NAME" / the API URL
    api_url: str
    auth: Auth
    s3_factory: Callable[[], Any]
    uploads_bucket: str | None
    outputs_bucket: str | None
    # Where S3's upload notifications go (a backfill sends its records there too).
    ingest_queue_url: str | None = None
    sqs_factory: Callable[[], Any] | None = None

    def s3(self) -> Any:
        return self.s3_factory()

    def sqs(self) -> Any:
        if self.sqs_factory is None:
            raise UsageError("this target gives no access to the stack's queues")
        return self.sqs_factory()

    def require_ingest_queue(self) -> str:
        if not self.ingest_queue_url:
            raise UsageError("no ingest queue: give --ingest-queue-url (or --stack-name)")
        return self.ingest_queue_url

    def require_uploads_bucket(self) -> str:
        if not self.uploads_bucket:
            raise UsageError("no uploads bucket: give --uploads-bucket (or --stack-name)")
        return self.uploads_bucket

    def require_outputs_bucket(self) -> str:
        if not self.outputs_bucket:
            raise UsageError("no outputs bucket: give --outputs-bucket (or --stack-name)")
        return self.outputs_bucket


def add_target_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("target (default: the local stack of `filejobs dev`)")
    group.add_argument("--stack-name", help="a deployed CloudFormation stack")
    group.add_argument("--api-url", help="a deployed API's base URL (requests are SigV4-signed)")
    group.add_argument("--uploads-bucket", help="with --api-url: the uploads bucket")
    group.add_argument("--outputs-bucket", help="with --api-url: the outputs bucket")
    group.add_argument("--ingest-queue-url", help="with --api-url: the ingest queue (backfill)")
    group.add_argument("--region", help="the AWS region of a deployed stack")


def resolve_target(arguments: argparse.Namespace, project_root: Callable[[], Path]) -> Target:
    stack_name: str | None = getattr(arguments, "stack_name", None)
    api_url: str | None = getattr(arguments, "api_url", None)
    region: str | None = getattr(arguments, "region", None)
    if stack_name and api_url:
        raise UsageError("give --stack-name or --api-url, not both")
    if stack_name:
        return stack_target(stack_name, region)
    if api_url:
        return api_url_target(
            api_url,
            region,
            getattr(arguments, "uploads_bucket", None),
            getattr(arguments, "outputs_bucket", None),
            getattr(arguments, "ingest_queue_url", None),
        )
    return local_target(project_root())


def local_target(root: Path) -> Target:
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
    )


def _session(region: str | None) -> Any:
    import boto3  # noqa: PLC0415

    return boto3.Session(region_name=region) if region else boto3.Session()


def stack_outputs(session: Any, stack_name: str) -> dict[str, str]:
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    try:
        answer = session.client("cloudformation").describe_stacks(StackName=stack_name)
    except ClientError as error:
        raise CliError(f"stack {stack_name}: {error.response['Error']['Message']}") from None
    except BotoCoreError as error:
        raise CliError(f"stack {stack_name}: {error}") from None
    stacks = answer.get("Stacks") or []
    if not stacks:
        raise CliError(f"no stack {stack_name}")
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs") or []}


def stack_target(stack_name: str, region: str | None) -> Target:
    session = _session(region)
    outputs = stack_outputs(session, stack_name)
    missing = [
        name
        for name in (API_URL_OUTPUT, UPLOADS_BUCKET_OUTPUT, OUTPUTS_BUCKET_OUTPUT)
        if not outputs.get(name)
    ]
    if missing:
        raise CliError(f"stack {stack_name} has no output {', '.join(missing)}")
    api_url = outputs[API_URL_OUTPUT]
    return Target(
        description=f"stack {stack_name}",
        api_url=api_url,
        auth=SigV4Auth(session, _region_of(api_url, session)),
        s3_factory=lambda: session.client("s3"),
        uploads_bucket=outputs[UPLOADS_BUCKET_OUTPUT],
        outputs_bucket=outputs[OUTPUTS_BUCKET_OUTPUT],
        ingest_queue_url=outputs.get(INGEST_QUEUE_OUTPUT),
        sqs_factory=lambda: session.client("sqs"),
    )


def api_url_target(
    api_url: str,
    region: str | None,
    uploads_bucket: str | None,
    outputs_bucket: str | None,
    ingest_queue_url: str | None = None,
) -> Target:
    if urllib.parse.urlsplit(api_url).scheme not in {"http", "https"}:
        raise UsageError(f"--api-url must be an http(s) URL, got {api_url!r}")
    session = _session(region)
    return Target(
        description=api_url,
        api_url=api_url,
        auth=SigV4Auth(session, _region_of(api_url, session)),
        s3_factory=lambda: session.client("s3"),
        uploads_bucket=uploads_bucket,
        outputs_bucket=outputs_bucket,
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
    """JSON over HTTP to the target's API."""

    def __init__(self, target: Target, timeout: float = 30.0) -> None:
        self.target = target
        self.timeout = timeout

    def get(self, path: str, query: Mapping[str, str | None] | None = None) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        return self.request("POST", path, body=body, headers=headers)

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | None] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        url = self.target.api_url.rstrip("/") + path
        pairs = {k: v for k, v in (query or {}).items() if v is not None}
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        data = None if body is None else json.dumps(body).encode()
        # SigV4 signs the headers it is given; extra ones (Idempotency-Key) travel unsigned.
        headers = {**(headers or {}), **self.target.auth.headers(method, url, data)}
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        # http(s) only: the URL comes from local.json, a stack output or a checked --api-url.
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                raw = answer.read()
        except urllib.error.HTTPError as error:
            raise http_error(error.code, error.read()) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise CliError(
                f"{self.target.description} is not reachable ({reason}); "
                "is it running? (`filejobs dev` starts the local stack)"
            ) from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise CliError(f"the API answered {method} {path} with something not JSON") from None


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
