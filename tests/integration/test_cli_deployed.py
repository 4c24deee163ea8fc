"""Specification: the CLI works against a deployed stack with one credential, and needs nothing
beyond the template's API role policies and the CLI user's policy docs/CLI.md documents.

The stack is the local one (`filejobs dev`: its real API, ingest, workers and S3), put behind
what a deployment adds, as AWS would:
- a CloudFormation stack on its emulator, whose outputs are template.yaml's (ApiUrl, the two API
  role ARNs, the uploads bucket, the ingest queue, the definitions updater);
- an API Gateway stand-in (`Gateway`) on 127.0.0.1: it verifies each request's SigV4 signature
  with the signer's secret, authorizes `execute-api:Invoke` against the signer's policies (403,
  as API Gateway, when they do not allow it), and hands the request on to the local API as the
  caller the real API would see (access.py: the operator role's session is the operator, the
  tenant role's the tenant its session names; anyone else 401);
- Lambda's Invoke of the definitions updater runs the local stack's updater.

The CLI runs in this process, as `main([...])`, with a profile's keys (`--profile`) and
FILEJOBS_STACK. Every AWS call it makes is recorded with the credentials that signed it, turned
into the IAM actions and resources AWS authorizes (tests/iam.py, plus CloudFormation, STS and
Lambda here) and evaluated with the signer's statements: the documented policy for the base
credentials (read from docs/CLI.md, so the doc and the test cannot drift), the template's
policies of the role for an API role's session. tests/iam.py's evaluation, rather than moto's
IAM enforcement: moto authorizes CloudFormation and Lambda against "*" only (so it would demand
`Resource: "*"` of the documented policy) and runs no condition on a role session name; this
evaluates every statement's resources, and the one condition the documented policy has.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.client import BaseClient
from botocore.response import StreamingBody
from PIL import Image

from filejobs_cli import transfer
from filejobs_cli.local_stack_file import tenant_token
from filejobs_cli.main import main
from filejobs_dev.infra.template import load_template
from filejobs_dev.local import commands as local_commands
from tests.iam import ACCOUNT, PARTITION, REGION, Call, Resolver, grants, permissions_of
from tests.localstack import ROOT, RunningStack, running_stack
from tests.loopback import QuietHandler, serving
from tests.sigv4 import SigV4Signature, signature_holds, signed_by

STACK = "filejobs-prod"
API_ID = "a1b2c3d4e5"
STAGE = "v1"
OPERATOR_ROLE = f"arn:{PARTITION}:iam::{ACCOUNT}:role/{STACK}-ApiOperatorRole-1A2B3C"
TENANT_ROLE = f"arn:{PARTITION}:iam::{ACCOUNT}:role/{STACK}-ApiTenantRole-4D5E6F"
UPDATER = f"{STACK}-DefinitionsUpdater-7G8H9I"
UPDATER_ARN = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{UPDATER}"
TENANT = "acme"
PROFILES = {  # name -> (key id, secret): each a principal with the documented policy
    "operator": ("AKIAOPERATORCLI00001", "operator-secret"),
    "acme": ("AKIATENANTACMECLI001", "acme-secret"),
}
FILE_LINE = re.compile(r"^(?P<path>.+): file (?P<id>[0-9a-f-]{36})$", re.MULTILINE)
TEMPLATE = load_template()


# --- the documented policy and the template's ---------------------------------------------------


def documented_policies() -> dict[str, dict[str, Any]]:
    """docs/CLI.md's JSON policies, by the heading above each ("An operator", "A tenant")."""
    text = (ROOT / "docs" / "CLI.md").read_text()
    section = text.split("\n## IAM policy\n", 1)[1].split("\n## ", 1)[0]
    found = {}
    for part in section.split("\n### ")[1:]:
        heading, _, body = part.partition("\n")
        block = re.search(r"```json\n(.*?)\n```", body, re.DOTALL)
        assert block, f"no JSON policy under {heading!r}"
        found[heading.strip()] = json.loads(block.group(1))
    assert set(found) == {"An operator", "A tenant"}, found.keys()
    return found


@dataclass(frozen=True)
class Statement:
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    # StringEquals sts:RoleSessionName (sts:AssumeRole), or aws:RequestTag/tenant (sts:TagSession)
    session_names: tuple[str, ...] | None = None

    def allows(self, action: str, resource: str, session_name: str | None) -> bool:
        if not any(fnmatchcase(action, a) for a in self.actions):
            return False
        if not any(fnmatchcase(resource, r) for r in self.resources):
            return False
        return self.session_names is None or session_name in self.session_names


def as_list(value: Any) -> tuple[str, ...]:
    return tuple(value if isinstance(value, list) else [value])


def documented(policy: dict[str, Any], values: dict[str, str]) -> list[Statement]:
    """A documented policy with its placeholders given values; any other condition refused."""
    text = json.dumps(policy)
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    statements = []
    for statement in json.loads(text)["Statement"]:
        assert statement["Effect"] == "Allow", statement
        condition = statement.get("Condition")
        names = None
        if condition is not None:
            assert list(condition) == ["StringEquals"], condition
            (key,) = condition["StringEquals"]
            assert key in {"sts:RoleSessionName", "aws:RequestTag/tenant"}, condition
            names = as_list(condition["StringEquals"][key])
        statements.append(
            Statement(as_list(statement["Action"]), as_list(statement["Resource"]), names)
        )
    return statements


def role_statements(role: str, resolver: Resolver) -> list[Statement]:
    """Every statement of the template's policy resources attached to `role`."""
    attached = [
        resource["Properties"]["PolicyDocument"]
        for resource in TEMPLATE["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        and {"Ref": role} in resource["Properties"].get("Roles", [])
    ]
    assert attached, f"no policy of the template is attached to {role}"
    return [Statement(tuple(g.actions), g.resources) for g in grants(attached, resolver)]


# --- the calls the CLI makes, by whom -----------------------------------------------------------


@dataclass(frozen=True)
class Signed:
    """One AWS call, with the access key that signed it (None: unsigned)."""

    call: Call
    key_id: str | None


@dataclass
class Principal:
    arn: str
    secret: str
    token: str | None
    statements: list[Statement]


@dataclass
class Deployment:
    stack: RunningStack
    gateway_url: str
    principals: dict[str, Principal]  # access key id -> who
    resolver: Resolver
    calls: list[Signed] = field(default_factory=list)
    invocations: list[tuple[str, str, str]] = field(default_factory=list)  # key, method, path
    refused: list[str] = field(default_factory=list)  # by the gateway

    def permissions(self, signed: Signed) -> list[tuple[str, str, str | None]]:
        """(action, resource, role session name or session tag) AWS authorizes the call
        against."""
        call = signed.call
        if call.service == "sts" and call.operation == "GetCallerIdentity":
            return []  # allowed to everyone, whatever the policies say
        if call.service == "sts" and call.operation == "AssumeRole":
            role = call.params["RoleArn"]
            tags = [("sts:TagSession", role, t["Value"]) for t in call.params.get("Tags", [])]
            return [("sts:AssumeRole", role, call.params["RoleSessionName"]), *tags]
        if call.service == "cloudformation" and call.operation == "DescribeStacks":
            name = call.params["StackName"]
            arn = f"arn:{PARTITION}:cloudformation:{REGION}:{ACCOUNT}:stack/{name}/stack-id"
            return [("cloudformation:DescribeStacks", arn, None)]
        if call.service == "lambda" and call.operation == "Invoke":
            arn = (
                f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{call.params['FunctionName']}"
            )
            return [("lambda:InvokeFunction", arn, None)]
        return [(action, resource, None) for action, resource in permissions_of(call)]

    def denied(self) -> list[str]:
        """Every permission a recorded call needed that its signer's statements do not give."""
        refused = list(self.refused)
        for signed in self.calls:
            who = self.principals.get(signed.key_id or "")
            for action, resource, session in self.permissions(signed):
                if who is None or not any(
                    s.allows(action, resource, session) for s in who.statements
                ):
                    name = who.arn if who else f"unknown key {signed.key_id}"
                    refused.append(f"{name}: {action} on {resource}")
        return sorted(set(refused))


def recording(deployment: Deployment, updater: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Patches botocore so that every call is recorded with its signer; a Lambda Invoke of the
    stack's updater runs the local stack's updater (the emulator runs no functions)."""
    original = BaseClient._make_api_call  # type: ignore[attr-defined]

    def record(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        service = client.meta.service_model.service_name
        signer = client._request_signer._credentials  # type: ignore[attr-defined]
        key_id = None if signer is None else signer.get_frozen_credentials().access_key
        deployment.calls.append(Signed(Call(service, operation, dict(params)), key_id))
        if service == "lambda" and operation == "Invoke" and params["FunctionName"] == UPDATER:
            raw = json.dumps(updater(json.loads(params["Payload"]))).encode()
            return {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(raw), len(raw))}
        answer = original(client, operation, params)
        if service == "sts" and operation == "AssumeRole":
            issued, user = answer["Credentials"], answer["AssumedRoleUser"]
            role = params["RoleArn"]
            statements = role_statements(
                "ApiOperatorRole" if role == OPERATOR_ROLE else "ApiTenantRole",
                deployment.resolver,
            )
            deployment.principals[issued["AccessKeyId"]] = Principal(
                user["Arn"], issued["SecretAccessKey"], issued["SessionToken"], statements
            )
        return answer

    return mock.patch.object(BaseClient, "_make_api_call", record)


# --- API Gateway, as the stack's IAM-authorized API -----------------------------------------------


class Gateway(QuietHandler):
    """IAM auth and execute-api:Invoke as API Gateway does them, then the local API."""

    deployment: Deployment

    def do_GET(self) -> None:
        self.relay()

    def do_POST(self) -> None:
        self.relay()

    def do_PUT(self) -> None:
        self.relay()

    def do_PATCH(self) -> None:
        self.relay()

    def do_DELETE(self) -> None:
        self.relay()

    def relay(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        found = signed_by(self.headers.get("Authorization", ""))
        who = self.deployment.principals.get(found.key) if found else None
        if found is None or who is None:
            self.answer_json(403, {"message": "Missing Authentication Token"})
            return
        if not self.signature_holds(found, who, body):
            self.answer_json(403, {"message": "The request signature we calculated does not match"})
            return
        path = urlsplit(self.path).path.removeprefix(f"/{STAGE}")
        resource = (
            f"arn:{PARTITION}:execute-api:{REGION}:{ACCOUNT}:{API_ID}/{STAGE}/{self.command}{path}"
        )
        self.deployment.invocations.append((found.key, self.command, path))
        if not any(s.allows("execute-api:Invoke", resource, None) for s in who.statements):
            refusal = f"{who.arn}: execute-api:Invoke on {resource}"
            self.deployment.refused.append(refusal)
            self.answer_json(403, {"message": f"User: {refusal} is not authorized"})
            return
        token = self.caller_token(who.arn)
        if token is None:
            self.answer_json(401, {"error": {"code": "unauthorized", "message": "no valid caller"}})
            return
        self.forward(self.path.removeprefix(f"/{STAGE}"), body, token)

    def signature_holds(self, signed: SigV4Signature, who: Principal, body: bytes) -> bool:
        return signed.service == "execute-api" and signature_holds(
            signed,
            method=self.command,
            url=f"http://{self.headers['Host']}{self.path}",
            headers=dict(self.headers.items()),
            body=body,
            secret=who.secret,
            token=who.token,
        )

    def caller_token(self, arn: str) -> str | None:
        """The local API's token of the caller the deployed API would see (access.py)."""
        config = self.deployment.stack.config
        role, _, session = arn.partition(":assumed-role/")[2].partition("/")
        if role == OPERATOR_ROLE.rsplit("/", 1)[1]:
            return str(config["api_token"])
        if role == TENANT_ROLE.rsplit("/", 1)[1]:
            return tenant_token(str(config["token_secret"]), session)
        return None

    def forward(self, path: str, body: bytes, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        for name in ("Content-Type", "Idempotency-Key"):
            if self.headers.get(name):
                headers[name] = self.headers[name]
        request = urllib.request.Request(
            self.deployment.stack.config["api_url"] + path,
            data=body or None,
            method=self.command,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, raw = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        self.send_body(status, raw, {"Content-Type": "application/json"})


# --- the deployment -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


@pytest.fixture(scope="module")
def deployment(stack: RunningStack) -> Iterator[Deployment]:
    with serving(Gateway) as base:
        yield deployed(stack, f"{base}/{STAGE}")


def deployed(stack: RunningStack, gateway_url: str) -> Deployment:
    """The deployment the gateway at `gateway_url` serves: the template's role policies on the
    stack's resources, the documented policies' principals, and a CloudFormation stack whose
    outputs point at the gateway."""
    uploads = stack.config["uploads_bucket"]
    queue = stack.config["resources"]["refs"]["IngestQueue"]
    queue_arn = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{queue.rsplit('/', 1)[1]}"
    resolver = Resolver(
        {
            "FileJobsApi": API_ID,
            "UploadsBucket.Arn": f"arn:{PARTITION}:s3:::{uploads}",
            "IngestQueue.Arn": queue_arn,
            "DefinitionsUpdater.Arn": UPDATER_ARN,
        },
        stack_name=STACK,
    )
    placeholders = {
        "REGION": REGION,
        "ACCOUNT_ID": ACCOUNT,
        "STACK_NAME": STACK,
        "UPLOADS_BUCKET": uploads,
        "OPERATOR_ROLE_ARN": OPERATOR_ROLE,
        "TENANT_ROLE_ARN": TENANT_ROLE,
        "TENANT": TENANT,
    }
    policies = documented_policies()
    principals = {
        PROFILES["operator"][0]: Principal(
            f"arn:{PARTITION}:iam::{ACCOUNT}:user/operator", PROFILES["operator"][1], None,
            documented(policies["An operator"], placeholders),
        ),
        PROFILES["acme"][0]: Principal(
            f"arn:{PARTITION}:iam::{ACCOUNT}:user/acme", PROFILES["acme"][1], None,
            documented(policies["A tenant"], placeholders),
        ),
    }  # fmt: skip
    deployment = Deployment(stack, gateway_url, principals, resolver)
    Gateway.deployment = deployment
    deploy_outputs(stack, gateway_url, queue)
    return deployment


def deploy_outputs(stack: RunningStack, api_url: str, queue_url: str) -> None:
    """A CloudFormation stack on the emulator whose outputs are template.yaml's, pointing at
    the local stack's resources and the gateway."""
    outputs = {
        "ApiUrl": api_url,
        "ApiOperatorRoleArn": OPERATOR_ROLE,
        "ApiTenantRoleArn": TENANT_ROLE,
        "UploadsBucketName": stack.config["uploads_bucket"],
        "IngestQueueUrl": queue_url,
        "DefinitionsUpdaterName": UPDATER,
    }
    assert set(outputs) <= set(TEMPLATE["Outputs"]), "outputs the template does not have"
    template = {
        "Resources": {"Marker": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }
    stack.client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(template))


@pytest.fixture
def as_a_user(
    deployment: Deployment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., tuple[int, str, str]]:
    """Runs `filejobs ARGS` in this process as a CLI user with a profile, FILEJOBS_STACK set and
    AWS's endpoints at the emulator; its AWS calls recorded in `deployment.calls`."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "".join(f"[{name}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
                for name, (key, secret) in PROFILES.items())
    )  # fmt: skip
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_ENDPOINT_URL", deployment.stack.config["endpoint_url"])
    monkeypatch.setenv("FILEJOBS_STACK", STACK)
    monkeypatch.delenv("FILEJOBS_AS", raising=False)
    monkeypatch.chdir(tmp_path)  # no local stack's config in reach: the deployed one is used
    stack_log = tmp_path / "updater.log"

    def updater(event: dict[str, Any]) -> dict[str, Any]:
        with stack_log.open("a") as log:
            root = deployment.stack.root
            return local_commands.invoke_local(root, "DefinitionsUpdater", event, log=log)

    deployment.calls.clear()
    deployment.refused.clear()

    def run(*arguments: str) -> tuple[int, str, str]:
        with recording(deployment, updater):
            code = main(list(arguments))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def png_of_noise(path: Path, side: int) -> None:
    """A PNG that does not compress: about 3 * side^2 bytes."""
    pixels = hashlib.shake_256(path.name.encode()).digest(3 * side * side)
    Image.frombytes("RGB", (side, side), pixels).save(path, "PNG")


# --- the specification ----------------------------------------------------------------------------

OPERATOR_UPLOADS = "cli-deployed"


def test_an_operator_uploads_follows_downloads_backfills_and_runs_the_updater_with_one_credential(
    deployment: Deployment,
    as_a_user: Callable[..., tuple[int, str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a photo whose name has spaces and brackets, larger than the multipart threshold
    monkeypatch.setattr(transfer, "MULTIPART_THRESHOLD", 5 * 1024 * 1024)
    monkeypatch.setattr(transfer, "PART_SIZE", 5 * 1024 * 1024)
    photo = tmp_path / "My Photo (2).png"
    png_of_noise(photo, 1400)
    assert photo.stat().st_size > 5 * 1024 * 1024
    # when the operator's principal uploads it and waits (no --as: an operator by default)
    code, out, err = as_a_user(
        "upload", str(photo), "--tenant", OPERATOR_UPLOADS, "--wait", "--timeout", "150",
        "--profile", "operator",
    )  # fmt: skip
    # then it went up in parts under a safe key, was processed, and nothing was refused
    assert code == 0, out + err
    key = f"uploads/{OPERATOR_UPLOADS}/My-Photo-2.png"
    assert f"to s3://{deployment.stack.config['uploads_bucket']}/{key}" in out
    operations = [(c.call.service, c.call.operation) for c in deployment.calls]
    assert ("s3", "CreateMultipartUpload") in operations
    assert ("s3", "CompleteMultipartUpload") in operations
    assert operations.count(("sts", "AssumeRole")) == 1  # once per run
    file_id = FILE_LINE.search(out)["id"]  # type: ignore[index]
    # when its outputs are fetched
    before = len(deployment.calls)
    code, out, err = as_a_user(
        "get", file_id, "--out", str(tmp_path / "out"), "--json", "--profile", "operator"
    )
    # then the thumbnails came through the API's presigned URLs: no S3 call of the CLI's own
    assert code == 0, err
    written = json.loads(out)["written"]
    assert {w["name"] for w in written} >= {"thumb-128.webp", "thumb-256.webp"}
    for item in written:
        with Image.open(item["path"]) as image:
            assert image.format == "WEBP"
    assert not [c for c in deployment.calls[before:] if c.call.service == "s3"]
    # and the operator's other commands work too: listing, a backfill in place, the updater
    code, out, err = as_a_user(
        "jobs", "--tenant", OPERATOR_UPLOADS, "--json", "--profile", "operator"
    )
    assert code == 0, err
    assert {j["file_id"] for j in json.loads(out)["jobs"]} == {file_id}
    code, out, err = as_a_user(
        "backfill", "--bucket", deployment.stack.config["uploads_bucket"],
        "--prefix", f"uploads/{OPERATOR_UPLOADS}/", "--no-follow", "--json",
        "--profile", "operator",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["counts"]["announced"] == 1
    code, out, err = as_a_user("definitions", "status", "--json", "--profile", "operator")
    assert code == 0, err
    assert json.loads(out)["status"]
    # and every call was allowed by the documented policy or the operator role's
    assert deployment.denied() == []
    assert {(c.call.service, c.call.operation) for c in deployment.calls} >= {
        ("cloudformation", "DescribeStacks"), ("sqs", "SendMessageBatch"),
        ("s3", "ListObjectVersions"), ("lambda", "Invoke"),
    }  # fmt: skip


def test_a_tenant_uploads_with_its_own_credentials_and_calls_the_api_as_the_tenant_role(
    deployment: Deployment, as_a_user: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    # given a tenant's principal with the documented tenant policy, and a file of its own
    notes = tmp_path / "Ma note d'été.txt"
    notes.write_text("filejobs, as a tenant\n" * 100)
    # when it uploads as the tenant (no --tenant: the one it acts as)
    code, out, err = as_a_user(
        "upload", str(notes), "--no-follow", "--as", f"tenant:{TENANT}", "--profile", "acme"
    )
    # then the object is under its own uploads, the API found it, and nothing was refused
    assert code == 0, out + err
    assert f"uploads/{TENANT}/Ma-note-d_été.txt" in out
    file_id = FILE_LINE.search(out)["id"]  # type: ignore[index]
    code, out, err = as_a_user(
        "status", file_id, "--json", "--as", f"tenant:{TENANT}", "--profile", "acme"
    )
    assert code == 0, err
    assert json.loads(out)["tenant"] == TENANT
    assert deployment.denied() == []
    # and the role was assumed under the tenant's name, the upload made with its own key
    assumed = [c.call.params for c in deployment.calls if c.call.operation == "AssumeRole"]
    assert {(p["RoleArn"], p["RoleSessionName"]) for p in assumed} == {(TENANT_ROLE, TENANT)}
    # with the session tag the tenant role's API policy checks against that name
    assert all(p["Tags"] == [{"Key": "tenant", "Value": TENANT}] for p in assumed)
    puts = [c for c in deployment.calls if c.call.operation == "PutObject"]
    assert puts and {c.key_id for c in puts} == {PROFILES["acme"][0]}
    # and another tenant's uploads are refused before anything is sent
    code, out, err = as_a_user(
        "upload", str(notes), "--tenant", "globex", "--as", f"tenant:{TENANT}", "--profile", "acme"
    )
    assert code == 2 and "another tenant's uploads" in err


def test_credentials_that_already_are_an_api_role_session_are_used_as_they_are(
    deployment: Deployment,
    as_a_user: Callable[..., tuple[int, str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given credentials of an operator role session, as a profile that assumes it would give
    sts = boto3.client(
        "sts", endpoint_url=deployment.stack.config["endpoint_url"], region_name=REGION,
        aws_access_key_id=PROFILES["operator"][0], aws_secret_access_key="x",
    )  # fmt: skip
    issued = sts.assume_role(RoleArn=OPERATOR_ROLE, RoleSessionName="ops-alice")
    keys, user = issued["Credentials"], issued["AssumedRoleUser"]
    deployment.principals[keys["AccessKeyId"]] = Principal(
        user["Arn"], keys["SecretAccessKey"], keys["SessionToken"],
        role_statements("ApiOperatorRole", deployment.resolver),
    )  # fmt: skip
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", keys["SessionToken"])
    # when a command runs with them (no --profile, no --as)
    code, out, err = as_a_user("failures", "--json")
    # then no role is assumed: the API is called as that session, as the operator
    assert code == 0, err
    assert "groups" in json.loads(out)
    assert not [c for c in deployment.calls if c.call.operation == "AssumeRole"]
    assert {key for key, _, _ in deployment.invocations[-1:]} == {keys["AccessKeyId"]}
    # the session's own policies describe no stack: the documented policy is for a principal
    assert [d for d in deployment.denied() if "DescribeStacks" not in d] == []


def test_a_call_outside_the_documented_policy_is_caught(
    deployment: Deployment, as_a_user: Callable[..., tuple[int, str, str]]
) -> None:
    # given the tenant's principal, whose policy lets it assume the tenant role as acme only
    # when it acts as another tenant (which the emulator's STS does not stop)
    code, _, err = as_a_user(
        "jobs", "--tenant", "globex", "--as", "tenant:globex", "--profile", "acme"
    )
    # then the evaluation names the calls its policy does not allow: the name and the tag
    assert code == 0, err
    assert deployment.denied() == [
        f"arn:{PARTITION}:iam::{ACCOUNT}:user/acme: sts:AssumeRole on {TENANT_ROLE}",
        f"arn:{PARTITION}:iam::{ACCOUNT}:user/acme: sts:TagSession on {TENANT_ROLE}",
    ]
