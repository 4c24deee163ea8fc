"""The use cases the status API's routes call, each built by the composition root
(filejobs/runtime.py) with what the API adds: its page tokens' secret and, where the stack
has an outputs bucket, links to the outputs."""

from __future__ import annotations

from filejobs import runtime
from filejobs.adapters.s3 import S3OutputLinks
from filejobs.services.api import StatusApi
from filejobs.services.operations import BulkOperations
from filejobs.services.page_tokens import PageTokens
from filejobs.services.presets import Presets
from filejobs.services.quotas import TenantLimits
from filejobs.services.schedules import Schedules
from filejobs.services.uploads import Uploads
from filejobs.services.webhooks import Webhooks


def page_tokens() -> PageTokens:
    return PageTokens(runtime.page_token_secret())


def status_api() -> StatusApi:
    bucket = runtime.settings().outputs_bucket
    links = S3OutputLinks(runtime.s3, bucket) if bucket else None
    return runtime.status_api(tokens=page_tokens(), links=links)


def operations() -> BulkOperations:
    return runtime.bulk_operations(status_api())


def schedules() -> Schedules:
    return runtime.schedules(status_api())


def presets() -> Presets:
    return runtime.presets()


def quotas() -> TenantLimits:
    return runtime.tenant_limits()


def webhooks() -> Webhooks:
    return runtime.webhooks()


def uploads() -> Uploads:
    return runtime.uploads()
