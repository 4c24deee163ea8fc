"""Shared fixtures: a fake clock, and AWS (moto) resources built from template.yaml."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from moto import mock_aws

# Never let a test reach a real AWS account, whatever the developer's environment holds.
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
)
for _variable in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
    os.environ.pop(_variable, None)

from filejobs.data.models import bind_tables  # noqa: E402
from filejobs_dev.infra.template import create_tables  # noqa: E402
from filejobs_dev.local import moto_fixes  # noqa: E402

# The tests' moto is the local stack's: with its fixes (each closer to AWS, each with a test that
# fails without it, run in a fresh process) and its speed-ups (moto's own answers, faster: a
# sweep over 256 shards in a third less time; every table's KMS key made without an RSA pair).
moto_fixes.apply()


def _share_service_models() -> None:
    """One loader of botocore's service models for every session of the test process.

    botocore reads and parses a service's model (S3's is megabytes of JSON) once per session, and
    the tests make sessions by the thousand: the runtime's after each `runtime.reset()`, and
    PynamoDB's for each binding of the tables. A client of a new session cost 0.1 s; with the
    models shared, 0.015 s (the suite on two cores: 503 s -> 337 s). A loader only reads files
    that do not change while the tests run.
    """
    shared = botocore.loaders.create_loader()
    made = botocore.session.Session.__init__

    def with_shared_models(self: botocore.session.Session, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self.register_component("data_loader", shared)

    botocore.session.Session.__init__ = with_shared_models  # type: ignore[method-assign]


_share_service_models()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test that starts the local stack `stack`, and every browser test `browser`
    (both `slow` too), so `-m "not stack"` needs no list kept by hand: a module that imports
    tests/localstack.py's `running_stack` or the local stack's `launched` starts one."""
    for item in items:
        module = getattr(item, "module", None)
        in_browser = item.path.parent.name == "browser"
        if in_browser:
            item.add_marker(pytest.mark.browser)
        starts_a_stack = any(getattr(module, name, None) for name in ("running_stack", "launched"))
        if in_browser or starts_a_stack:
            item.add_marker(pytest.mark.stack)
            item.add_marker(pytest.mark.slow)


class FakeClock:
    """A clock the test moves by hand: lease expiry and backoff without sleeping."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC))


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def tables(aws: None) -> dict[str, str]:
    """JobsTable and FilesTable exactly as template.yaml defines them, bound to the models."""
    suffix = uuid.uuid4().hex[:8]
    names = {"JobsTable": f"jobs-{suffix}", "FilesTable": f"files-{suffix}"}
    create_tables(boto3.client("dynamodb"), names)
    bind_tables(jobs_table=names["JobsTable"], files_table=names["FilesTable"])
    return names


# Fixtures of shared test benches (tests/processing.py: `media`).
pytest_plugins = ["tests.processing"]
