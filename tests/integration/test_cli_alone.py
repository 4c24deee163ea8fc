"""Specification: the CLI installs alone (`pipx install ./cli`, `pip install ./cli`: boto3 and
shtab, nothing of the dev tools) and works against a deployed stack, found by its API URL or by
its CloudFormation stack's outputs; its requests are SigV4-signed. The deployed API here is a
stand-in on 127.0.0.1 that checks each signature as API Gateway's IAM authorization would;
CloudFormation and STS are moto's. (tests/integration/test_cli_deployed.py runs the CLI against
a whole stack under the template's and the documented IAM policies.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from tests.loopback import QuietHandler, serving
from tests.sigv4 import signature_holds, signed_by

ROOT = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
KEY_ID, SECRET = "AKIDCLIALONE", "cli-alone-secret"
OPERATOR_ROLE = "arn:aws:iam::123456789012:role/filejobs-prod-ApiOperatorRole-1A2B"
JOB_ID = "0c535fa5-a5ec-5dfe-88d6-630684923320"
FILE_ID = "6b0d9f4e-1c1e-5a53-9a51-3cbb1f7b2f10"
JOB = {
    "id": JOB_ID,
    "file_id": FILE_ID,
    "job_type": "thumbnail_generation",
    "tenant": "acme",
    "status": "completed",
    "attempt": 1,
    "retry_count": 0,
    "max_retries": 3,
}


@pytest.fixture(scope="module")
def cli_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with `pip install ./cli` and nothing else (the source copied: pip's build
    leaves its folders where it builds)."""
    scratch = tmp_path_factory.mktemp("cli-alone")
    source = scratch / "cli"
    shutil.copytree(ROOT / "cli", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # uv where the project's venv has it (make install puts it there): the same install, from
    # the CLI's own pyproject, in a tenth of pip's time.
    uv = Path(sys.executable).parent / "uv"
    install: list[str | Path] = (
        [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python"]
        if uv.exists()
        else [venv / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check"]
    )
    subprocess.run([*install, str(source)], check=True)
    return venv


class SignedApi(QuietHandler):
    """GET /jobs/{id}: the job, for a request signed with a known key; 403 otherwise."""

    seen: list[dict[str, str]] = []  # noqa: RUF012 (one server per module, read by the tests)
    # key id -> (secret, session token): whose signatures hold
    known: dict[str, tuple[str, str | None]] = {KEY_ID: (SECRET, None)}  # noqa: RUF012

    def do_GET(self) -> None:
        headers = {key: value for key, value in self.headers.items()}
        SignedApi.seen.append({"path": self.path, **headers})
        if not self.signature_holds(headers):
            self.answer_json(403, {"message": "The request signature we calculated does not match"})
        elif self.path.rstrip("/").endswith(f"/jobs/{JOB_ID}"):
            self.answer_json(200, JOB)
        else:
            self.answer_json(404, {"error": {"code": "not_found", "message": "no such job"}})

    def signature_holds(self, headers: dict[str, str]) -> bool:
        signed = signed_by(headers.get("Authorization", ""))
        if signed is None or signed.key not in SignedApi.known or signed.region != REGION:
            return False
        secret, token = SignedApi.known[signed.key]
        host = {k.lower(): v for k, v in headers.items()}.get("host", "")
        return signed.service == "execute-api" and signature_holds(
            signed, method="GET", url=f"http://{host}{self.path}", headers=headers, body=None,
            secret=secret, token=token,
        )  # fmt: skip


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    with serving(SignedApi) as url:
        yield f"{url}/prod/"


def run_cli(venv: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    clean = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(venv),
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        **environment,
    }
    return subprocess.run(
        [venv / "bin" / "filejobs", *arguments],
        capture_output=True,
        text=True,
        env=clean,
        cwd=venv,
        check=False,
        timeout=120,
    )


def test_the_cli_alone_has_no_dev_tools_or_runtime(cli_venv: Path) -> None:
    # when only the CLI is installed
    probe = "import importlib.util as u; print([m for m in ('moto', 'yaml', 'filejobs', "
    probe += "'filejobs_dev', 'pynamodb', 'aws_lambda_powertools') if u.find_spec(m)])"
    found = subprocess.run(
        [cli_venv / "bin" / "python", "-c", probe], capture_output=True, text=True, check=True
    )
    # then none of the dev tools, nor the Lambda runtime's packages, came with it
    assert found.stdout.strip() == "[]"


def test_it_reads_a_job_from_a_deployed_api_with_signed_requests(
    cli_venv: Path, api_url: str
) -> None:
    ran = run_cli(cli_venv, "status", JOB_ID, "--api-url", api_url, "--region", REGION, "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == JOB
    assert SignedApi.seen[-1]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=")


def test_it_finds_a_deployed_stack_by_name(cli_venv: Path, api_url: str) -> None:
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
        deploy_stack_with_outputs(endpoint, api_url)
        # given credentials that already are a session of the stack's operator role
        session = operator_session(endpoint)
        # when the CLI is given the stack's name (from the environment, as FILEJOBS_STACK)
        ran = run_cli(
            cli_venv,
            "status",
            JOB_ID,
            "--region",
            REGION,
            FILEJOBS_STACK="filejobs-prod",
            AWS_ENDPOINT_URL_CLOUDFORMATION=endpoint,
            AWS_ENDPOINT_URL_STS=endpoint,
            **session,
        )
    finally:
        server.stop()
    # then it read the API's URL from the stack's outputs and the job from that API, signed
    # with the session as it is (no role assumed again)
    assert ran.returncode == 0, ran.stderr
    assert f"job {JOB_ID}" in ran.stdout
    assert "status:   completed" in ran.stdout
    assert f"Credential={session['AWS_ACCESS_KEY_ID']}/" in SignedApi.seen[-1]["Authorization"]


def operator_session(endpoint: str) -> dict[str, str]:
    """Credentials of a session of the stack's operator role, as the environment holds them;
    the stand-in API knows their secret."""
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    issued = sts.assume_role(RoleArn=OPERATOR_ROLE, RoleSessionName="ops")["Credentials"]
    key, secret, token = issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"]
    SignedApi.known[key] = (secret, token)
    return {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token}


def test_a_bad_signature_is_reported_in_one_line(cli_venv: Path, api_url: str) -> None:
    ran = run_cli(
        cli_venv,
        "status",
        JOB_ID,
        "--api-url",
        api_url,
        "--region",
        REGION,
        AWS_SECRET_ACCESS_KEY="not-the-secret",
    )
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines() == [
        "filejobs: the API answered HTTP 403: The request signature we calculated does not match"
    ]


def test_the_local_stack_commands_say_what_they_need(cli_venv: Path) -> None:
    ran = run_cli(cli_venv, "dev", "--workers", "2")
    assert ran.returncode == 1
    assert "needs the project's dev tools" in ran.stderr
    assert "Traceback" not in ran.stderr


def deploy_stack_with_outputs(endpoint: str, api_url: str) -> None:
    """A stack whose outputs are the ones the CLI reads (template.yaml's names)."""
    template = {
        "Resources": {"Uploads": {"Type": "AWS::S3::Bucket"}},
        "Outputs": {
            "ApiUrl": {"Value": api_url},
            "ApiOperatorRoleArn": {"Value": OPERATOR_ROLE},
            "UploadsBucketName": {"Value": {"Ref": "Uploads"}},
            "OutputsBucketName": {"Value": "filejobs-prod-outputs"},
        },
    }
    client = boto3.client(
        "cloudformation",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    client.create_stack(StackName="filejobs-prod", TemplateBody=json.dumps(template))


# --- pipx ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pipx_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pipx install ./cli`, as its README tells: pipx (PyPI's) in a venv of its own, its home
    and its bin folder in a scratch folder."""
    scratch = tmp_path_factory.mktemp("pipx")
    source = scratch / "cli"
    shutil.copytree(ROOT / "cli", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    tool = scratch / "tool"
    subprocess.run([sys.executable, "-m", "venv", str(tool)], check=True)
    subprocess.run(
        [tool / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check", "pipx"],
        check=True,
    )
    environment = {
        "PATH": f"{tool / 'bin'}:/usr/bin:/bin",
        "HOME": str(scratch),
        "PIPX_HOME": str(scratch / "pipx-home"),
        "PIPX_BIN_DIR": str(scratch / "bin"),
        "PIPX_MAN_DIR": str(scratch / "man"),
    }
    subprocess.run(
        [tool / "bin" / "pipx", "install", str(source)],
        check=True,
        env=environment,
        capture_output=True,
        timeout=600,
    )
    return scratch / "bin"


@pytest.mark.slow
def test_pipx_installs_the_cli_with_its_version_help_and_completion(pipx_bin: Path) -> None:
    filejobs = pipx_bin / "filejobs"
    version = tomllib.loads((ROOT / "cli" / "pyproject.toml").read_text())["project"]["version"]
    ran = subprocess.run(
        [filejobs, "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert ran.stdout == f"filejobs {version}\n"
    helped = subprocess.run(
        [filejobs, "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    for command in ("upload", "status", "get", "completion", "webhooks"):
        assert command in helped.stdout
    script = subprocess.run(
        [filejobs, "completion", "bash"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "--stack-name" in script.stdout
