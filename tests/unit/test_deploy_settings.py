"""Specification: what `make deploy` reads from samconfig.toml and refuses before it builds
(tools/deploy.py), and the stack names the template can be deployed under."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.infra.stack_names import MAX_STACK_NAME, stack_name_problem

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = runpy.run_path(str(ROOT / "tools" / "deploy.py"), run_name="deploy")
environment = DEPLOY["environment"]
checked = DEPLOY["checked"]
deploy_arguments = DEPLOY["deploy_arguments"]
DeployError: type[Exception] = DEPLOY["DeployError"]


def samconfig(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "samconfig.toml"
    path.write_text(text)
    return path


def test_every_environment_of_the_project_s_samconfig_names_a_stack_the_template_can_carry() -> (
    None
):
    for name in ("default", "prod"):
        env = checked(environment(name))
        assert env.region == "us-east-1"
    assert environment("default").stack_name == "filejobs"
    assert environment("prod").stack_name == "filejobs-prod"


def test_an_environment_s_deploy_section_wins_over_its_global_one(tmp_path: Path) -> None:
    path = samconfig(
        tmp_path,
        '[staging.global.parameters]\nstack_name = "files-staging"\nregion = "eu-west-1"\n'
        '[staging.deploy.parameters]\nstack_name = "files-stage2"\nprofile = "ops"\n',
    )
    env = environment("staging", path)
    assert (env.stack_name, env.region, env.profile) == ("files-stage2", "eu-west-1", "ops")


def test_another_environment_is_never_read_for_a_missing_setting(tmp_path: Path) -> None:
    # sam reads one environment: prod does not inherit default's stack name
    path = samconfig(
        tmp_path,
        '[default.global.parameters]\nstack_name = "filejobs"\n'
        "[prod.deploy.parameters]\nconfirm_changeset = true\n",
    )
    with pytest.raises(DeployError, match=r"environment 'prod' of samconfig\.toml names no stack"):
        environment("prod", path)


def test_an_unknown_environment_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    path = samconfig(tmp_path, '[default.global.parameters]\nstack_name = "filejobs"\n')
    with pytest.raises(
        DeployError, match=r"no environment 'prd' in samconfig.toml \(it has: default\)"
    ):
        environment("prd", path)


def test_a_stack_name_s3_would_refuse_stops_the_deploy_before_the_build(tmp_path: Path) -> None:
    path = samconfig(tmp_path, '[default.global.parameters]\nstack_name = "FileJobs"\n')
    with pytest.raises(DeployError, match=r"must start with a lower-case letter.*'default'"):
        checked(environment("default", path))


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("filejobs", None),
        ("filejobs-prod", None),
        ("a" * MAX_STACK_NAME, None),
        ("a" * (MAX_STACK_NAME + 1), "at most 27 fit"),
        ("FileJobs", "lower-case"),
        ("files_prod", "lower-case"),
        ("9lives", "lower-case"),
        ("xn--files", "S3 reserves"),
        ("sthree-files", "S3 reserves"),
        ("", "empty"),
    ],
)
def test_stack_names_that_would_break_the_uploads_bucket_s_name(
    name: str, problem: str | None
) -> None:
    found = stack_name_problem(name)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_the_longest_stack_name_fits_the_uploads_bucket_in_the_longest_region() -> None:
    bucket = f"{'a' * MAX_STACK_NAME}-uploads-123456789012-ap-southeast-5"
    assert len(bucket) == 63


def test_the_first_deploy_of_an_environment_is_guided_and_later_ones_are_not(
    tmp_path: Path,
) -> None:
    env: Any = environment("prod")
    first = deploy_arguments(env, first_time=True)
    later = deploy_arguments(env, first_time=False)
    assert first[:3] == ["deploy", "--config-env", "prod"] and first[-1] == "--guided"
    assert "--guided" not in later
    assert later[later.index("--template-file") + 1].endswith(".aws-sam/build/template.yaml")
