"""`make deploy` and `make delete`: the stack of one samconfig.toml environment, built, checked,
deployed or deleted (docs/DEPLOY.md).

    .venv/bin/python tools/deploy.py deploy --env default --sam .tools/sam/bin/sam
    .venv/bin/python tools/deploy.py delete --env prod --sam .tools/sam/bin/sam [--yes]
    .venv/bin/python tools/deploy.py check --env prod       # the environment's stack name only

deploy: refuses a stack name the uploads bucket cannot carry (before anything is built: AWS
would refuse it minutes into the deploy), builds container-free into .aws-sam/build with this
venv's python3.13 first on PATH (SAM's cache in a folder per digest of the layer builders,
infra/layers), checks the build (tools/check_build.py), then runs
`sam deploy --config-env ENV`, guided when the stack does not exist yet (SAM then saves the
answers into samconfig.toml for the next time).

delete: CloudFormation cannot delete a bucket that holds objects, and the uploads and quarantine
buckets are versioned. The stack's buckets are counted, emptied (every version and delete
marker) once the operator confirms by typing the stack's name (or --yes), then `sam delete`. The
tables (and a Cognito user pool the stack made) are kept (DeletionPolicy Retain): their names are
printed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filejobs_dev.infra.stack_names import stack_name_problem

ROOT = Path(__file__).resolve().parents[1]
SAMCONFIG = ROOT / "samconfig.toml"
BUILD_DIR = ROOT / ".aws-sam" / "build"
# What builds the layers (the Makefile every layer's Metadata.ContextPath names, the debs.py):
# out of their ContentUri (layers/), so out of what SAM keys its build cache on.
LAYER_BUILDERS = ROOT / "infra" / "layers"
VENV_BIN = ROOT / ".venv" / "bin"
# S3's DeleteObjects takes at most this many keys a request.
DELETE_BATCH = 1000


class DeployError(Exception):
    """A reason to stop before (or instead of) touching AWS, in one line."""


@dataclass(frozen=True)
class Environment:
    """What samconfig.toml says of one environment (`sam ... --config-env NAME`)."""

    name: str
    stack_name: str
    region: str | None
    profile: str | None


def environment(name: str, samconfig: Path = SAMCONFIG) -> Environment:
    """The environment's stack name, region and profile, as SAM reads them for `deploy`: its
    deploy section first, then its global one (SAM never falls back to another environment)."""
    try:
        config = tomllib.loads(samconfig.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise DeployError(f"{samconfig}: {error}") from None
    sections = config.get(name)
    if not isinstance(sections, dict):
        known = ", ".join(k for k, v in config.items() if isinstance(v, dict)) or "none"
        raise DeployError(f"no environment {name!r} in {samconfig.name} (it has: {known})")

    def setting(key: str) -> str | None:
        for command in ("deploy", "global"):
            value = sections.get(command, {}).get("parameters", {}).get(key)
            if value:
                return str(value)
        return None

    stack_name = setting("stack_name")
    if stack_name is None:
        raise DeployError(f"environment {name!r} of {samconfig.name} names no stack_name")
    return Environment(name, stack_name, setting("region"), setting("profile"))


def checked(env: Environment) -> Environment:
    problem = stack_name_problem(env.stack_name)
    if problem is not None:
        raise DeployError(f"{problem} (samconfig.toml, environment {env.name!r})")
    return env


def aws_session(env: Environment) -> Any:
    import boto3  # noqa: PLC0415 (only the commands that reach AWS need it)
    from botocore.exceptions import BotoCoreError  # noqa: PLC0415

    try:
        return boto3.Session(profile_name=env.profile, region_name=env.region)
    except BotoCoreError as error:
        raise DeployError(f"AWS profile {env.profile!r}: {error}") from None


def stack_exists(cloudformation: Any, stack_name: str) -> bool:
    """Whether the stack exists (a stack deleted earlier, or never made, does not)."""
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", "")
        if "does not exist" in message:
            return False
        raise DeployError(f"CloudFormation: {message or error}") from None
    except BotoCoreError as error:
        raise DeployError(f"AWS: {error} (configure credentials: aws configure)") from None
    return any(s.get("StackStatus") != "DELETE_COMPLETE" for s in stacks)


def deploy_arguments(env: Environment, *, first_time: bool) -> list[str]:
    """sam deploy's arguments: the environment's saved settings; guided the first time."""
    arguments = [
        "deploy",
        "--config-env",
        env.name,
        "--template-file",
        str(BUILD_DIR / "template.yaml"),
    ]
    return [*arguments, "--guided"] if first_time else arguments


def builders_digest(builders: Path = LAYER_BUILDERS) -> str:
    """SHA-256 of the layer builders: every file's path and bytes (compiled Python left out)."""
    digest = hashlib.sha256()
    for path in sorted(builders.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            data = path.read_bytes()
            digest.update(f"{path.relative_to(builders).as_posix()}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


def build_cache_dir(builders: Path = LAYER_BUILDERS, under: Path = BUILD_DIR.parent) -> Path:
    """sam build's cache folder. SAM reuses a layer's cached build while the files of its
    ContentUri (layers/) are unchanged, whatever became of the Makefile and scripts that built it
    (infra/layers): a folder per digest of those, so a changed builder rebuilds every layer
    instead of deploying what the old one built."""
    return under / f"cache-{builders_digest(builders)[:16]}"


def drop_other_caches(kept: Path) -> None:
    """The caches of earlier builders, each a copy of every built layer, are never read again."""
    for cache in kept.parent.glob("cache-*"):
        if cache != kept and cache.is_dir():
            shutil.rmtree(cache)


def build_arguments(env: Environment, cache_dir: Path) -> list[str]:
    """sam build's arguments: the environment's settings (cached), into BUILD_DIR."""
    return [
        "build",
        "--config-env",
        env.name,
        "--build-dir",
        str(BUILD_DIR),
        "--cache-dir",
        str(cache_dir),
    ]


def build_environment() -> dict[str, str]:
    """sam build without a container needs python3.13 first on PATH (this venv's)."""
    return {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "SAM_CLI_TELEMETRY": "0",
    }


def run(command: list[str], env: dict[str, str] | None = None) -> None:
    print("+ " + " ".join(command), flush=True)
    finished = subprocess.run(command, cwd=ROOT, env=env, check=False)  # noqa: S603
    if finished.returncode != 0:
        raise DeployError(
            f"{Path(command[0]).name} {command[1]} failed (exit {finished.returncode})"
        )


def deploy(env: Environment, sam: str) -> None:
    checked(env)
    first_time = not stack_exists(aws_session(env).client("cloudformation"), env.stack_name)
    cache_dir = build_cache_dir()
    drop_other_caches(cache_dir)
    run([sam, *build_arguments(env, cache_dir)], build_environment())
    run([str(VENV_BIN / "python"), str(ROOT / "tools" / "check_build.py"), str(BUILD_DIR)])
    if first_time:
        print(f"stack {env.stack_name} does not exist yet: sam deploy asks for its settings once")
    run([sam, *deploy_arguments(env, first_time=first_time)])


# --- delete ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackContents:
    buckets: dict[str, int]  # bucket name -> object versions and delete markers it holds
    # What the stack's delete leaves (DeletionPolicy: Retain): "DynamoDB table NAME", and with
    # ApiAuth=COGNITO "Cognito user pool ID" (it holds the people who sign in).
    kept: list[str]


def stack_contents(session: Any, stack_name: str) -> StackContents:
    resources = session.client("cloudformation").describe_stack_resources(StackName=stack_name)
    buckets: dict[str, int] = {}
    kept: list[str] = []
    s3 = session.client("s3")
    for resource in resources["StackResources"]:
        name = resource.get("PhysicalResourceId")
        if not name or resource.get("ResourceStatus") == "DELETE_COMPLETE":
            continue
        if resource["ResourceType"] == "AWS::S3::Bucket":
            buckets[name] = sum(len(batch) for batch in _versions(s3, name))
        elif resource["ResourceType"] in _KEPT:
            kept.append(f"{_KEPT[resource['ResourceType']]} {name}")
    return StackContents(buckets, sorted(kept))


# The resources the template keeps when the stack is deleted, as an operator would name them.
_KEPT = {"AWS::DynamoDB::Table": "DynamoDB table", "AWS::Cognito::UserPool": "Cognito user pool"}


def _versions(s3: Any, bucket: str) -> Iterator[list[dict[str, str]]]:
    """Every object version and delete marker of `bucket`, in DeleteObjects' batches."""
    for page in s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": DELETE_BATCH}
    ):
        batch = [
            {"Key": item["Key"], "VersionId": item["VersionId"]}
            for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        ]
        if batch:
            yield batch


def empty_bucket(s3: Any, bucket: str) -> int:
    """Deletes every version and delete marker of `bucket`; how many went."""
    deleted = 0
    for batch in list(_versions(s3, bucket)):
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            raise DeployError(f"s3://{bucket}/{first.get('Key')}: {first.get('Message')}")
        deleted += len(batch)
    return deleted


def confirmed(stack_name: str, contents: StackContents, ask: Callable[[str], str]) -> bool:
    """The operator typed the stack's name after seeing what its buckets hold."""
    for bucket, count in sorted(contents.buckets.items()):
        print(f"  s3://{bucket}: {count} object versions and delete markers")
    answer = ask(f"Type {stack_name} to empty these buckets for good and delete the stack: ")
    return answer.strip() == stack_name


def delete(env: Environment, sam: str, *, yes: bool, ask: Callable[[str], str] = input) -> None:
    session = aws_session(env)
    if not stack_exists(session.client("cloudformation"), env.stack_name):
        raise DeployError(
            f"stack {env.stack_name} does not exist (region {env.region or 'default'})"
        )
    contents = stack_contents(session, env.stack_name)
    if any(contents.buckets.values()):
        print(
            f"{env.stack_name}'s buckets hold objects, and CloudFormation deletes no such bucket:"
        )
        if not yes and not confirmed(env.stack_name, contents, ask):
            raise DeployError("not confirmed: nothing was deleted")
        s3 = session.client("s3")
        for bucket, count in sorted(contents.buckets.items()):
            if count:
                print(f"emptied s3://{bucket}: {empty_bucket(s3, bucket)} deleted", flush=True)
    run([sam, "delete", "--config-env", env.name, "--no-prompts"])
    if contents.kept:
        print("kept (DeletionPolicy Retain; delete them by hand when their data may go):")
        for resource in contents.kept:
            print(f"  {resource}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("check", "refuse the environment's stack name if the uploads bucket cannot carry it"),
        ("deploy", "build, check and deploy the environment's stack (guided the first time)"),
        ("delete", "empty the stack's buckets (confirmed) and delete the stack"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("--env", default="default", help="samconfig.toml environment")
        if name != "check":
            command.add_argument("--sam", required=True, help="the sam command to run")
        if name == "delete":
            command.add_argument("--yes", action="store_true", help="empty without asking")
    arguments = parser.parse_args(argv)
    try:
        env = environment(arguments.env)
        if arguments.command == "check":
            print(f"stack name {checked(env).stack_name}: ok")
        elif arguments.command == "deploy":
            deploy(env, arguments.sam)
        else:
            delete(env, arguments.sam, yes=arguments.yes)
    except DeployError as error:
        print(f"{arguments.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{arguments.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
