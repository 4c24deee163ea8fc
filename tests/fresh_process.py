"""A scenario that patches moto for its whole process (the local stack's fixes and speed-ups),
run in a process of its own so that the rest of the suite keeps moto as released.

The processes are forked from a `forkserver` that has imported moto, boto3 and the scenarios'
modules once and patched nothing: each starts with moto as released, in milliseconds, where a
spawned interpreter spent 1.5 CPU-seconds importing them again (two dozen scenarios run).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(
    [
        "boto3",
        "moto.server",
        "moto.dynamodb.models",
        "moto.dynamodbstreams.models",
        "moto.kms.models",
        "moto.s3.models",
        "moto.sqs.models",
        "filejobs_dev.local.stack",
        "tests.integration.test_local_front",
        "tests.integration.test_local_moto_fixes",
    ]
)


def in_fresh_process(scenario: Callable[..., Any], **keywords: Any) -> Any:
    """`scenario(**keywords)`'s answer, worked out in a process forked for it alone."""
    with _CONTEXT.Pool(1) as pool:
        return pool.apply(scenario, kwds=keywords)
