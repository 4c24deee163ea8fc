"""Upload presets, the pure rules and the use case on in-memory fakes: which preset an upload
gets (the one it names, else the longest bound prefix's, else the tenant's default, else the
default table), which of its jobs fit the upload, what a preset may say, how versions go on, and
that ingest reads a tenant's presets once a minute, not once an upload."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from filejobs.access import Caller
from filejobs.domain.content import job_types_for
from filejobs.domain.ingest import ObjectCreated
from filejobs.domain.job import JobType
from filejobs.domain.presets import (
    AppliedPreset,
    Preset,
    PresetError,
    PresetJob,
    TenantPresets,
    check_jobs,
    default_plan,
)
from filejobs.services.errors import ConflictError, InvalidRequestError, NotFoundError
from filejobs.services.ingest import IngestService
from filejobs.services.presets import PresetCache, PresetChange, Presets
from tests.fakes import FixedHead, InMemoryFileStore, InMemoryJobStore, InMemoryPresets

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
ACME = Caller(tenant="acme", operator=False)
GLOBEX = Caller(tenant="globex", operator=False)
OPERATOR = Caller(tenant=None, operator=True)

SCAN = PresetJob(JobType.VIRUS_SCAN)
# A tenant's own ordering of its jobs: below its others (0 or below is a tenant's to give).
WEBP_512 = PresetJob(JobType.THUMBNAIL_GENERATION, {"sizes": [512], "format": "webp"}, -5)
PREVIEW = PresetJob(JobType.DOCUMENT_PREVIEW)


def preset(name: str, *jobs: PresetJob, prefixes: tuple[str, ...] = (), **kw: object) -> Preset:
    return Preset("acme", name, 1, jobs, prefixes, **kw)  # type: ignore[arg-type]


AVATARS = preset("avatars", SCAN, WEBP_512, prefixes=("uploads/acme/avatars/",))
STAFF = preset("staff", SCAN, prefixes=("uploads/acme/avatars/staff/",))
CONTRACTS = preset("contracts", SCAN, PREVIEW, prefixes=("uploads/acme/contracts/",))
ARCHIVE = preset("archive", prefixes=("uploads/acme/archive/",))
QUICK = preset("quick", SCAN, tenant_default=True)


def types(plan_jobs: tuple[object, ...]) -> list[str]:
    return [job.job_type.value for job in plan_jobs]  # type: ignore[attr-defined]


# --- which preset an upload gets ------------------------------------------------------------


def test_an_upload_under_a_bound_prefix_gets_that_presets_jobs_with_their_options() -> None:
    plan = TenantPresets((AVATARS, CONTRACTS)).plan("uploads/acme/avatars/me.jpg", "image/jpeg")
    assert types(plan.jobs) == ["thumbnail_generation", "virus_scan"]
    thumbnail = plan.jobs[0]
    assert (thumbnail.options, thumbnail.priority) == ({"sizes": [512], "format": "webp"}, -5)
    assert plan.preset == AppliedPreset("avatars", 1, "prefix")


def test_the_longest_bound_prefix_wins() -> None:
    presets = TenantPresets((AVATARS, STAFF))
    assert presets.plan("uploads/acme/avatars/staff/a.jpg", "image/jpeg").preset == AppliedPreset(
        "staff", 1, "prefix"
    )
    assert presets.plan("uploads/acme/avatars/b.jpg", "image/jpeg").preset.name == "avatars"  # type: ignore[union-attr]


def test_a_preset_named_in_the_uploads_metadata_wins_over_its_prefix() -> None:
    plan = TenantPresets((AVATARS, CONTRACTS)).plan(
        "uploads/acme/avatars/scan.pdf", "application/pdf", requested="Contracts"
    )
    assert plan.preset == AppliedPreset("contracts", 1, "metadata")
    assert types(plan.jobs) == ["document_preview", "virus_scan"]


def test_a_named_preset_the_tenant_lacks_is_noted_and_the_next_rule_applies() -> None:
    plan = TenantPresets((AVATARS,)).plan(
        "uploads/acme/avatars/a.jpg", "image/jpeg", requested="avatarz"
    )
    assert plan.preset == AppliedPreset("avatars", 1, "prefix")
    assert plan.note is not None and "'avatarz'" in plan.note


def test_the_tenants_default_preset_takes_uploads_no_prefix_binds() -> None:
    plan = TenantPresets((AVATARS, QUICK)).plan("uploads/acme/misc/a.png", "image/png")
    assert plan.preset == AppliedPreset("quick", 1, "tenant")
    assert types(plan.jobs) == ["virus_scan"]


def test_without_a_preset_an_upload_gets_its_content_types_default_jobs() -> None:
    plan = TenantPresets((AVATARS,)).plan("uploads/acme/other/a.png", "image/png")
    assert plan.preset is None
    assert tuple(job.job_type for job in plan.jobs) == job_types_for("image/png")
    assert plan == default_plan("image/png")


def test_of_a_presets_jobs_an_upload_gets_those_that_fit_its_content_type() -> None:
    # a PDF under the avatars prefix: no thumbnailer is handed a PDF
    plan = TenantPresets((AVATARS,)).plan("uploads/acme/avatars/cv.pdf", "application/pdf")
    assert types(plan.jobs) == ["virus_scan"]


def test_audio_gets_a_presets_thumbnail_only_when_the_sniffer_found_cover_art() -> None:
    music = preset("music", SCAN, WEBP_512, prefixes=("uploads/acme/music/",))
    presets = TenantPresets((music,))
    with_art = presets.plan("uploads/acme/music/a.mp3", "audio/mpeg", cover_art=True)
    without = presets.plan("uploads/acme/music/b.mp3", "audio/mpeg")
    assert types(with_art.jobs) == ["thumbnail_generation", "virus_scan"]
    assert types(without.jobs) == ["virus_scan"]


def test_a_store_only_preset_gives_no_job() -> None:
    plan = TenantPresets((ARCHIVE,)).plan("uploads/acme/archive/2019.tar", "application/x-tar")
    assert plan.jobs == ()
    assert plan.preset == AppliedPreset("archive", 1, "prefix")


# --- what a preset may say ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "field", "reason"),
    [
        ((SCAN, SCAN), "jobs[1].job_type", "listed twice"),
        ((WEBP_512,), "jobs", "add virus_scan"),
        ((PresetJob(JobType.COMPRESSION),), "jobs", "add virus_scan"),
        (
            (SCAN, PresetJob(JobType.THUMBNAIL_GENERATION, {"sizes": [9000]})),
            "jobs[1].options.sizes[0]",
            "",
        ),
        ((SCAN, PresetJob(JobType.VIRUS_SCAN, {"deep": True})), "jobs[1].options.deep", ""),
        ((PresetJob(JobType.VIRUS_SCAN, priority=101),), "jobs[0].priority", "-100 to 100"),
    ],
)
def test_a_preset_is_refused_naming_the_field(
    jobs: tuple[PresetJob, ...], field: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=r"^\S+: ") as refused:
        check_jobs(jobs)
    assert str(refused.value).startswith(f"{field}:")
    assert reason in str(refused.value)


def test_scan_only_and_store_only_are_presets_like_any_other() -> None:
    check_jobs((SCAN,))
    check_jobs(())
    check_jobs((SCAN, PresetJob(JobType.DEDUPLICATION_CHECK)))


# --- the use case: versions, bindings, tenants ----------------------------------------------


def change(*jobs: PresetJob, prefixes: tuple[str, ...] = (), default: bool = False) -> PresetChange:
    return PresetChange(jobs, prefixes, default)


def test_each_save_is_a_new_version_and_every_version_stays_readable() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    first = service.put(ACME, None, "avatars", change(SCAN, prefixes=("uploads/acme/a/",)))
    second = service.put(ACME, None, "avatars", change(SCAN, WEBP_512, prefixes=first.prefixes))
    assert (first.version, second.version) == (1, 2)
    assert service.get(ACME, None, "avatars") == second
    assert service.get(ACME, None, "avatars", version=1) == first
    assert second.updated_by == "api:tenant:acme"


def test_a_preset_removed_and_made_again_goes_on_from_its_last_version() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    service.put(ACME, None, "avatars", change(SCAN))
    service.put(ACME, None, "avatars", change(SCAN))
    service.delete(ACME, None, "avatars")
    with pytest.raises(NotFoundError):
        service.get(ACME, None, "avatars")
    again = service.put(ACME, None, "avatars", change(SCAN))
    assert again.version == 3
    assert service.get(ACME, None, "avatars", version=2).version == 2


def test_a_prefix_is_bound_to_one_preset_and_a_tenant_has_one_default() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    service.put(ACME, None, "avatars", change(SCAN, prefixes=("uploads/acme/a/",), default=True))
    with pytest.raises(InvalidRequestError, match=r"prefixes: 'uploads/acme/a/' is bound"):
        service.put(ACME, None, "other", change(SCAN, prefixes=("uploads/acme/a/",)))
    with pytest.raises(InvalidRequestError, match="tenant_default: preset 'avatars'"):
        service.put(ACME, None, "other", change(SCAN, default=True))


def test_a_raised_priority_is_an_operators_to_give_in_a_preset_too() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    raised = PresetJob(JobType.THUMBNAIL_GENERATION, {"sizes": [512]}, 5)
    with pytest.raises(InvalidRequestError, match=r"jobs\[1\]\.priority: 5 is an operator's"):
        service.put(ACME, None, "avatars", change(SCAN, raised))
    assert service.put(ACME, None, "avatars", change(SCAN, WEBP_512)).jobs[1].priority == -5
    assert service.put(OPERATOR, "acme", "avatars", change(SCAN, raised)).version == 2


def test_a_prefix_outside_the_tenants_uploads_is_refused() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    with pytest.raises(InvalidRequestError, match=r"prefixes\[0\]: must start with"):
        service.put(ACME, None, "x", change(SCAN, prefixes=("uploads/globex/",)))


def test_a_tenant_sees_and_changes_only_its_own_presets_and_an_operator_names_the_tenant() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    service.put(ACME, None, "avatars", change(SCAN))
    assert service.of_tenant(GLOBEX, None) == ()
    with pytest.raises(NotFoundError):
        service.get(GLOBEX, "acme", "avatars")
    with pytest.raises(NotFoundError):
        service.put(GLOBEX, "acme", "avatars", change())
    with pytest.raises(InvalidRequestError, match="tenant: an operator names"):
        service.of_tenant(OPERATOR, None)
    assert [p.name for p in service.of_tenant(OPERATOR, "acme")] == ["avatars"]


def test_a_change_that_loses_a_race_is_made_on_the_fresh_set() -> None:
    store = InMemoryPresets()
    service = Presets(store, clock=lambda: NOW)
    service.put(ACME, None, "avatars", change(SCAN))
    racing = store.save

    def one_race_lost(*args: object, **kwargs: object) -> bool:
        store.save = racing  # type: ignore[method-assign]
        # someone else's change lands between this change's read and its write
        Presets(store, clock=lambda: NOW).put(ACME, None, "other", change(SCAN))
        return False

    store.save = one_race_lost  # type: ignore[method-assign]
    service.put(ACME, None, "avatars", change(SCAN, WEBP_512))
    assert {p.name: p.version for p in service.of_tenant(ACME, None)} == {
        "avatars": 2,
        "other": 1,
    }


def test_a_change_that_keeps_losing_races_is_refused_not_retried_forever() -> None:
    store = InMemoryPresets()
    store.save = lambda *a, **k: False  # type: ignore[method-assign]
    with pytest.raises(ConflictError, match="try again"):
        Presets(store, clock=lambda: NOW).put(ACME, None, "avatars", change(SCAN))


def test_a_tenant_has_at_most_fifty_presets() -> None:
    service = Presets(InMemoryPresets(), clock=lambda: NOW)
    for n in range(50):
        service.put(ACME, None, f"p{n}", change(SCAN))
    with pytest.raises(ConflictError, match="50 presets"):
        service.put(ACME, None, "one-more", change(SCAN))
    service.put(ACME, None, "p0", change())  # a new version of one it has is fine


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="name:"):
        Presets(InMemoryPresets()).put(ACME, None, "Avatars!", change(SCAN))
    with pytest.raises(PresetError):
        check_jobs((PresetJob(JobType.THUMBNAIL_GENERATION),))


# --- ingest: the preset's jobs, recorded, and read once a minute ----------------------------


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def upload(key: str, marker: str = "v1") -> ObjectCreated:
    return ObjectCreated("uploads-bucket", key, 100, "etag", version_id=marker)


def test_ingest_creates_exactly_the_presets_jobs_and_records_its_name_and_version() -> None:
    store = InMemoryPresets()
    Presets(store, clock=lambda: NOW).put(
        ACME, None, "avatars", change(SCAN, WEBP_512, prefixes=("uploads/acme/avatars/",))
    )
    files = InMemoryFileStore(InMemoryJobStore())
    service = IngestService(files, FixedHead(b"\xff\xd8\xff\xe0"), presets=PresetCache(store).of)
    result = service.ingest(upload("uploads/acme/avatars/me.jpg"))
    jobs = {job.job_type: job for job in result.plan.jobs}  # type: ignore[union-attr]
    assert set(jobs) == {JobType.VIRUS_SCAN, JobType.THUMBNAIL_GENERATION}
    thumbnail = jobs[JobType.THUMBNAIL_GENERATION]
    assert thumbnail.priority == -5
    assert thumbnail.input_data["sizes"] == [512]  # type: ignore[index]
    assert thumbnail.input_data["key"] == "uploads/acme/avatars/me.jpg"  # type: ignore[index]
    stored = files.get(result.plan.file.id)  # type: ignore[union-attr]
    assert stored is not None and stored.preset == AppliedPreset("avatars", 1, "prefix")


def test_an_upload_naming_a_preset_in_its_metadata_gets_it() -> None:
    store = InMemoryPresets()
    Presets(store, clock=lambda: NOW).put(ACME, None, "archive", change())
    head = FixedHead(b"%PDF-1.7\n", preset="archive")
    service = IngestService(
        InMemoryFileStore(InMemoryJobStore()), head, presets=PresetCache(store).of
    )
    result = service.ingest(upload("uploads/acme/reports/q3.pdf"))
    assert result.plan.jobs == ()  # type: ignore[union-attr]
    assert result.plan.file.preset == AppliedPreset("archive", 1, "metadata")  # type: ignore[union-attr]


def test_ingest_reads_a_tenants_presets_once_a_minute_not_once_an_upload() -> None:
    store, ticks = InMemoryPresets(), Ticks()
    service = IngestService(
        InMemoryFileStore(InMemoryJobStore()),
        FixedHead(),
        presets=PresetCache(store, clock=ticks).of,
    )
    for n in range(20):
        service.ingest(upload(f"uploads/acme/doc-{n}.pdf", f"v{n}"))
    service.ingest(upload("uploads/globex/doc.pdf"))
    assert store.reads == 2  # acme's once, globex's once
    ticks.now = 61.0
    service.ingest(upload("uploads/acme/late.pdf"))
    assert store.reads == 3


def test_a_change_reaches_ingest_within_the_caches_minute() -> None:
    store, ticks = InMemoryPresets(), Ticks()
    cache = PresetCache(store, clock=ticks)
    assert cache.of("acme").presets == ()
    Presets(store, clock=lambda: NOW).put(ACME, None, "quick", change(SCAN, default=True))
    assert cache.of("acme").presets == ()  # still the cached answer
    ticks.now = 60.0
    assert [p.name for p in cache.of("acme").presets] == ["quick"]
