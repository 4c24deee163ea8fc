"""Specification: each worker writes only its own job type's derived files (issue 45, item 5).

A derived file's key names its job type as a path segment (domain/keys.py derived_key:
`derived/TENANT/FILE/TYPE/NAME`), and each worker role's S3 writes name that segment, so a
decoder exploited in one worker cannot replace the outputs (a preview, a thumbnail) another type
made. Grants are matched as IAM matches resource ARNs (`*` spans `/`).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import pytest

from filejobs.domain.job import JobType
from filejobs.domain.keys import derived_key
from filejobs_dev.infra.template import load_template

RESOURCES: dict[str, dict[str, Any]] = load_template()["Resources"]
BUCKET_ARN = "arn:aws:s3:::outputs"
WRITES = {"s3:PutObject", "s3:AbortMultipartUpload"}


def worker_role(job_type: JobType) -> str:
    return "".join(part.title() for part in job_type.value.split("_")) + "WorkerRole"


def write_patterns(role: str) -> list[str]:
    """The object ARNs the role may put, with its bucket's ARN resolved."""
    patterns = []
    for policy in RESOURCES[role]["Properties"]["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if not WRITES & set(actions if isinstance(actions, list) else [actions]):
                continue
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                text = resource["Fn::Sub"] if isinstance(resource, dict) else resource
                patterns.append(text.replace("${OutputsBucket.Arn}", BUCKET_ARN))
    return patterns


def may_write(role: str, key: str) -> bool:
    return any(fnmatchcase(f"{BUCKET_ARN}/{key}", p) for p in write_patterns(role))


FILE = "0b6f3c52-3c9e-5d4b-9f6e-0d7f1c2b3a4e"


@pytest.mark.parametrize("job_type", list(JobType))
def test_a_worker_writes_its_own_types_outputs_and_no_other_types(job_type: JobType) -> None:
    role = worker_role(job_type)
    assert may_write(role, derived_key("acme", FILE, job_type, "out.webp"))
    for other in set(JobType) - {job_type}:
        assert not may_write(role, derived_key("acme", FILE, other, "out.webp")), other


@pytest.mark.parametrize("job_type", list(JobType))
def test_no_tenant_name_lets_a_worker_reach_another_types_folder(job_type: JobType) -> None:
    # a tenant (or file) named after the worker's type does not make another type's key match
    role = worker_role(job_type)
    for other in set(JobType) - {job_type}:
        assert not may_write(role, derived_key(job_type.value, FILE, other, "out.webp"))
        assert not may_write(role, f"derived/acme/{job_type.value}/{other.value}/out.webp")


def test_a_worker_writes_nothing_outside_derived() -> None:
    role = worker_role(JobType.THUMBNAIL_GENERATION)
    assert not may_write(role, "signatures/daily.cvd")
    assert not may_write(role, "thumbnail_generation/acme/out.webp")
