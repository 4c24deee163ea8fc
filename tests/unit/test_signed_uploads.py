"""Signed uploads (POST /uploads): the key a grant gets, its bounds, who may have one, what the
request may ask for, and the policy the real signer writes (botocore signs locally: no request).

(tests/integration/test_local_s3_forms.py posts the forms to the local stack's S3;
tests/browser/test_browser_upload.py uploads from a page on another origin.)
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest

from filejobs.access import Caller
from filejobs.adapters.s3 import S3UploadSigner
from filejobs.api import parsing
from filejobs.domain.job import JobType
from filejobs.domain.presets import Preset, PresetJob, PresetSet
from filejobs.domain.quotas import QuotaChange, TenantQuotas
from filejobs.domain.uploads import (
    MAX_METADATA_BYTES,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_NAME_CHARS,
    MAX_METADATA_VALUE_CHARS,
    MAX_POST_BYTES,
    UploadGrant,
    UploadRequest,
    grant,
    safe_name,
)
from filejobs.ports import SignedUpload
from filejobs.services.errors import InvalidRequestError, MalformedRequestError, NotFoundError
from filejobs.services.quotas import TenantLimits
from filejobs.services.uploads import Uploads
from filejobs_cli.upload_keys import safe_name as cli_safe_name
from tests.fakes import InMemoryPresets, InMemoryQuotaStore

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
UNIQUE = uuid.UUID("0b7f6f1e-2f7a-4c52-9a57-1d2c3b4a5e6f")
DEFAULTS = TenantQuotas(files_per_day=0, bytes_per_day=0, max_file_bytes=2000, max_in_flight_jobs=0)
ACME = Caller(tenant="acme", operator=False)
OPERATOR = Caller(tenant=None, operator=True)


class EchoSigner:
    """The UploadSigner port: what it was asked to sign, answered as a form naming the key."""

    def __init__(self) -> None:
        self.signed: list[UploadGrant] = []

    def sign(self, grant: UploadGrant) -> SignedUpload:
        self.signed.append(grant)
        return SignedUpload("http://bucket", {"key": grant.key})


def uploads(presets: InMemoryPresets | None = None) -> tuple[Uploads, EchoSigner, TenantLimits]:
    limits = TenantLimits(InMemoryQuotaStore(), DEFAULTS)
    signer = EchoSigner()
    return (
        Uploads(signer, limits.limits, presets or InMemoryPresets(), clock=lambda: T0),
        signer,
        limits,
    )


# --- the key ---------------------------------------------------------------------------------


def test_a_grant_s_key_is_new_dated_and_ends_with_the_safe_file_name() -> None:
    asked = UploadRequest(filename="Harbour at dusk (1).JPG", folder="avatars/")
    made = grant("acme", asked, max_file_bytes=0, now=T0, unique=UNIQUE)
    assert made.key == f"uploads/acme/avatars/2026/12/{UNIQUE}/Harbour-at-dusk-1.JPG"


def test_two_grants_for_one_name_never_share_a_key() -> None:
    asked = UploadRequest(filename="photo.jpg")
    keys = {grant("acme", asked, max_file_bytes=0, now=T0).key for _ in range(50)}
    assert len(keys) == 50


@pytest.mark.parametrize(
    "name",
    [
        "../../etc/passwd",
        "a/b\\c.png",
        "\x00\x1f.jpg",
        "   ",
        "résumé.pdf",
        "x" * 400 + ".jpeg",
        "",
    ],
)
def test_a_file_name_cannot_leave_its_folder_and_is_made_as_the_cli_makes_it(name: str) -> None:
    made = safe_name(name)
    assert "/" not in made and ".." not in made and made.isprintable() and made
    assert len(made.encode()) <= 200
    # the same upload named the same way lands under the same name from the CLI and a browser
    assert made == cli_safe_name(name)


# --- bounds ----------------------------------------------------------------------------------


def test_the_size_bound_is_the_tenant_s_file_size_limit_in_force() -> None:
    service, signer, limits = uploads()
    assert service.mint(ACME, None, UploadRequest()).grant.max_bytes == 2000
    limits.store.change("acme", QuotaChange(set={"max_file_bytes": 0}), at=T0, by="op")
    # unlimited: S3's largest single POST still bounds a form
    assert service.mint(ACME, None, UploadRequest()).grant.max_bytes == MAX_POST_BYTES
    assert [g.max_bytes for g in signer.signed] == [2000, MAX_POST_BYTES]


def test_a_grant_expires_when_asked_within_an_hour() -> None:
    service, _, _ = uploads()
    default = service.mint(ACME, None, UploadRequest()).grant
    assert default.expires_at == T0 + timedelta(minutes=15)
    for seconds in (59, 3601):
        with pytest.raises(InvalidRequestError, match="expires_in"):
            service.mint(ACME, None, UploadRequest(expires_in=timedelta(seconds=seconds)))


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"Album": "x"}, "metadata.Album"),
        ({"filejobs-preset": "avatars"}, "metadata.filejobs-preset"),
        ({"album": "é"}, "metadata.album"),
        ({"album": "x" * 113}, "metadata.album"),
        ({f"k{n}": "v" for n in range(11)}, "metadata"),
    ],
)
def test_metadata_is_bounded_and_the_service_s_names_are_its_own(
    metadata: dict[str, str], field: str
) -> None:
    service, signer, _ = uploads()
    with pytest.raises(InvalidRequestError, match=f"^{field}:"):
        service.mint(ACME, None, UploadRequest(metadata=metadata))
    assert signer.signed == []


def test_any_metadata_the_schema_allows_fits_what_s3_keeps_for_it() -> None:
    # the longest names and values, as many as allowed: within the budget, and taken
    most = MAX_METADATA_ENTRIES * (MAX_METADATA_NAME_CHARS + MAX_METADATA_VALUE_CHARS)
    assert most <= MAX_METADATA_BYTES
    longest = {f"{n:02d}" + "k" * (MAX_METADATA_NAME_CHARS - 2): "v" * MAX_METADATA_VALUE_CHARS
               for n in range(MAX_METADATA_ENTRIES)}  # fmt: skip
    service, _, _ = uploads()
    assert service.mint(ACME, None, UploadRequest(metadata=longest)).grant.metadata == longest


# --- who, and which preset --------------------------------------------------------------------


def test_a_tenant_signs_into_its_own_uploads_and_an_operator_names_the_tenant() -> None:
    service, _, _ = uploads()
    assert service.mint(ACME, None, UploadRequest()).grant.key.startswith("uploads/acme/")
    assert service.mint(ACME, "acme", UploadRequest()).grant.tenant == "acme"
    with pytest.raises(NotFoundError):
        service.mint(ACME, "globex", UploadRequest())
    with pytest.raises(InvalidRequestError, match="tenant"):
        service.mint(OPERATOR, None, UploadRequest())
    assert service.mint(OPERATOR, "globex", UploadRequest()).grant.key.startswith("uploads/globex/")


def test_a_named_preset_must_exist_and_travels_as_the_metadata_ingest_reads() -> None:
    avatars = Preset("acme", "avatars", 1, (PresetJob(JobType.VIRUS_SCAN),))
    service, _, _ = uploads(InMemoryPresets(sets={"acme": PresetSet((avatars,), 1)}))
    made = service.mint(ACME, None, UploadRequest(preset="avatars")).grant
    assert made.metadata == {"filejobs-preset": "avatars"}
    # one it does not have is not there (404), as a missing preset is everywhere in the API
    with pytest.raises(NotFoundError, match=r"^preset: tenant 'acme' has no preset"):
        service.mint(ACME, None, UploadRequest(preset="banners"))


# --- the request -----------------------------------------------------------------------------


def test_the_request_body_is_parsed_with_every_field_optional() -> None:
    tenant, asked = parsing.upload_request(None)
    assert tenant is None and asked == UploadRequest()
    body = {
        "tenant": "acme",
        "filename": "a.png",
        "content_type": "image/png",
        "metadata": {"album": "x"},
        "expires_in": 120,
    }
    tenant, asked = parsing.upload_request(json.dumps(body))
    assert tenant == "acme"
    assert asked.expires_in == timedelta(seconds=120) and asked.metadata == {"album": "x"}


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ("{", MalformedRequestError),
        ('{"key": "uploads/acme/x"}', InvalidRequestError),
        ('{"tenant": "../x"}', InvalidRequestError),
        ('{"filename": 3}', InvalidRequestError),
        ('{"metadata": {"a": 1}}', InvalidRequestError),
        ('{"expires_in": "soon"}', InvalidRequestError),
    ],
)
def test_a_request_that_cannot_be_granted_is_refused_before_any_read(
    body: str, refusal: type[Exception]
) -> None:
    with pytest.raises(refusal):
        parsing.upload_request(body)


# --- the policy the real signer writes -------------------------------------------------------


def signed_policy(made: UploadGrant) -> tuple[dict[str, str], dict[str, Any]]:
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLE", "secret", "session-token")
    client: Any = session.create_client("s3", region_name="us-east-1")
    form = S3UploadSigner(lambda: client, "filejobs-uploads").sign(made)
    return form.fields, json.loads(base64.b64decode(form.fields["policy"]))


def test_the_form_allows_exactly_its_key_its_size_its_type_and_its_metadata() -> None:
    asked = UploadRequest(filename="a.png", content_type="image/png", metadata={"album": "x"})
    made = grant("acme", asked, max_file_bytes=2000, now=datetime.now(UTC), unique=UNIQUE)
    fields, policy = signed_policy(made)
    conditions = policy["conditions"]
    assert {"key": made.key} in conditions
    assert ["content-length-range", 1, 2000] in conditions
    assert {"Content-Type": "image/png"} in conditions
    assert {"x-amz-meta-album": "x"} in conditions
    assert fields["key"] == made.key and fields["Content-Type"] == "image/png"
    # no condition lets the form carry tags (the scan-status tag is the virus scan's), an ACL
    # or another key: S3 refuses a field no condition names
    named = json.dumps(conditions).lower()
    assert "tagging" not in named and "acl" not in named and 'starts-with", "$key' not in named
    expires = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
    assert abs(expires - made.expires_at) < timedelta(seconds=5)


def test_without_a_content_type_the_browser_may_send_its_own() -> None:
    made = grant("acme", UploadRequest(), max_file_bytes=0, now=datetime.now(UTC))
    fields, policy = signed_policy(made)
    assert ["starts-with", "$Content-Type", ""] in policy["conditions"]
    assert "Content-Type" not in fields
