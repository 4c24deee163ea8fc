"""Specification: where the functions' AWS clients send their requests."""

from __future__ import annotations

from filejobs.config import endpoint_from


def test_the_template_s_empty_endpoint_variables_mean_aws_s_own_endpoints() -> None:
    # as deployed: the template declares both, empty
    deployed = {"FILEJOBS_ENDPOINT_URL": "", "FILEJOBS_ENDPOINT_URL_DYNAMODB": ""}
    assert endpoint_from(deployed) is None
    assert endpoint_from(deployed, "dynamodb") is None


def test_sam_local_s_variables_point_every_client_at_the_local_stack() -> None:
    local = {
        "FILEJOBS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "FILEJOBS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:4577",
    }
    assert endpoint_from(local) == "http://127.0.0.1:4566"
    assert endpoint_from(local, "dynamodb") == "http://127.0.0.1:4577"
    assert endpoint_from(local, "s3") == "http://127.0.0.1:4566"


def test_botocore_s_own_variables_still_count_where_ours_are_not_set() -> None:
    botocore = {"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "FILEJOBS_ENDPOINT_URL": ""}
    assert endpoint_from(botocore) == "http://127.0.0.1:4566"
    assert endpoint_from(botocore, "dynamodb") == "http://127.0.0.1:4566"
    apart = {**botocore, "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:4577"}
    assert endpoint_from(apart, "dynamodb") == "http://127.0.0.1:4577"
