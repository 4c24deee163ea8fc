"""A tenant erased as a tracked operation ("a customer leaving": services/operations.py
`erase_tenant`, services/tenant_erasure.py), on in-memory ports: every file, setting and remnant
of the tenant gone, the other tenants untouched, each page done and counted once."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.access import Caller
from filejobs.domain import keys
from filejobs.domain.file import StoredFile
from filejobs.domain.file_lifecycle import Erasure, KeyVersions, ObjectRemoved, OutputsPurge
from filejobs.domain.operations import Action, Operation, OperationStatus
from filejobs.domain.quotas import OperationCharge
from filejobs.domain.schedules import Schedule, ScheduleAction
from filejobs.domain.tenant_erasure import REMAINS_BATCH, ErasureStep, Stage
from filejobs.services.api import StatusApi
from filejobs.services.errors import ConflictError, ForbiddenError
from filejobs.services.file_lifecycle import FileLifecycle
from filejobs.services.operations import BulkOperations, EraseTenant
from filejobs.services.tenant_erasure import TenantErasure
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
KEEP = timedelta(days=30)
BUCKET = "uploads-bucket"
OPERATOR = Caller(tenant=None, operator=True)
LEAVING = "leaving"
# An image's jobs on upload, each given one output in this world (World.upload).
OUTPUTS_PER_FILE = len(ingest_plan(NOW, "image/png").jobs)
STAYING = "staying"


# --- in-memory ports -----------------------------------------------------------------------------


@dataclass
class Buckets:
    """The uploads bucket's versions by key (newest first), the outputs and quarantine keys."""

    uploads: dict[str, list[str]] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)
    quarantine: set[str] = field(default_factory=set)

    def under(self, prefix: str) -> list[str]:
        return sorted(
            [k for k, v in self.uploads.items() if k.startswith(prefix) and v]
            + [k for k in self.outputs | self.quarantine if k.startswith(prefix)]
        )


@dataclass
class UploadVersionsPort:
    buckets: Buckets

    def versions(self, bucket: str, key: str) -> KeyVersions:
        return KeyVersions(tuple(self.buckets.uploads.get(key, [])), marker_on_top=False)

    def delete_all(self, bucket: str, key: str) -> int:
        return len(self.buckets.uploads.pop(key, []))

    def delete_version(self, bucket: str, key: str, version_id: str) -> None:
        versions = self.buckets.uploads.get(key, [])
        if version_id in versions:
            versions.remove(version_id)


@dataclass
class OutputsPort:
    buckets: Buckets

    def delete_all(self, tenant: str, file_id: str) -> int:
        prefix = keys.derived_prefix(tenant, file_id)
        gone = {k for k in self.buckets.outputs if k.startswith(prefix)}
        self.buckets.outputs -= gone
        return len(gone)


@dataclass
class TenantObjectsPort:
    buckets: Buckets

    def delete_uploads(self, tenant: str, *, most: int) -> int:
        deleted = 0
        for key in sorted(self.buckets.uploads):
            while key.startswith(f"uploads/{tenant}/") and self.buckets.uploads[key]:
                if deleted == most:
                    return deleted
                self.buckets.uploads[key].pop()
                deleted += 1
        return deleted

    def delete_outputs(self, tenant: str, *, most: int) -> int:
        return _delete_some(self.buckets.outputs, f"derived/{tenant}/", most)

    def delete_quarantined(self, tenant: str, *, most: int) -> int:
        return _delete_some(self.buckets.quarantine, f"quarantine/{tenant}/", most)


def _delete_some(found: set[str], prefix: str, most: int) -> int:
    gone = sorted(k for k in found if k.startswith(prefix))[:most]
    found -= set(gone)
    return len(gone)


@dataclass
class Settings:
    """Each tenant's settings besides its schedules, as counts by kind."""

    kept: dict[str, dict[str, int]] = field(default_factory=dict)

    def erase(self, tenant: str) -> dict[str, int]:
        return self.kept.pop(tenant, {})


@dataclass
class Schedules:
    """ScheduleStore and Scheduler: the records, and which of them are armed."""

    records: dict[str, Schedule] = field(default_factory=dict)
    armed: set[str] = field(default_factory=set)

    def create(self, schedule: Schedule) -> bool:
        if schedule.id in self.records:
            return False
        self.records[schedule.id] = schedule
        return True

    def get(self, schedule_id: str) -> Schedule | None:
        return self.records.get(schedule_id)

    def of_tenant(self, tenant: str | None) -> list[Schedule]:
        return [s for s in self.records.values() if tenant in (None, s.tenant)]

    def set_enabled(
        self, schedule_id: str, enabled: bool, *, at: datetime, by: str
    ) -> Schedule | None:
        found = self.records.get(schedule_id)
        if found is not None:
            self.records[schedule_id] = replace(found, enabled=enabled, updated_at=at)
        return self.records.get(schedule_id)

    def delete(self, schedule_id: str) -> bool:
        return self.records.pop(schedule_id, None) is not None

    def record_run(self, schedule_id: str, scheduled_time: datetime, operation_id: str) -> bool:
        return schedule_id in self.records

    def arm(self, schedule: Schedule) -> None:
        self.armed.add(schedule.id)

    def disarm(self, schedule_id: str) -> None:
        self.armed.discard(schedule_id)


@dataclass
class Operations:
    """OperationStore: a page recorded only over the state it started from; `crash_next` makes
    the next record fail, as a function that dies after its page's work and before its record."""

    stored: dict[str, Operation] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    crash_next: bool = False

    def create(
        self,
        operation: Operation,
        *,
        caller: str,
        key: str,
        charge: OperationCharge | None = None,
    ) -> Operation:
        found = self.keys.setdefault(f"{caller}#{key}", operation.id)
        self.stored.setdefault(found, operation)
        return self.stored[found]

    def running(self, tenant: str, *, now: datetime) -> int:
        return sum(o.tenant == tenant and not o.finished for o in self.stored.values())

    def get(self, operation_id: str) -> Operation | None:
        return self.stored.get(operation_id)

    def recent(
        self, *, tenant: str | None, after: str | None, limit: int
    ) -> tuple[list[Operation], str | None]:
        return sorted(self.stored.values(), key=lambda o: o.id, reverse=True)[:limit], None

    def record_page(self, before: Operation, after: Operation) -> bool:
        if self.crash_next:
            self.crash_next = False
            raise TimeoutError("the function timed out before its record")
        current = self.stored[before.id]
        if current.finished or current.cursor != before.cursor:
            return False
        self.stored[before.id] = after
        return True


@dataclass
class Queue:
    sent: list[str] = field(default_factory=list)

    def send(self, operation: Operation, delay: timedelta) -> None:
        self.sent.append(operation.id)


@dataclass
class Log:
    erasures: list[Erasure] = field(default_factory=list)
    purges: list[OutputsPurge] = field(default_factory=list)
    removals: list[ObjectRemoved] = field(default_factory=list)

    def record(self, erasure: Erasure) -> None:
        self.erasures.append(erasure)

    def purge_later(self, purge: OutputsPurge) -> None:
        self.purges.append(purge)

    def follow_later(self, removed: ObjectRemoved, delay: timedelta) -> None:
        self.removals.append(removed)


@dataclass
class World:
    jobs: InMemoryJobStore
    files: InMemoryFileStore
    buckets: Buckets
    settings: Settings
    schedules: Schedules
    store: Operations
    queue: Queue
    log: Log
    operations: BulkOperations

    def upload(self, tenant: str, name: str, version: str = "v1") -> StoredFile:
        plan = ingest_plan(NOW, "image/png", tenant=tenant, name=name, version_id=version)
        self.files.record_ingest(plan)
        self.buckets.uploads.setdefault(plan.file.key, []).insert(0, version)
        for job in plan.jobs:
            self.buckets.outputs.add(keys.derived_key(tenant, plan.file.id, job.job_type, "out"))
        return plan.file

    def schedule(self, tenant: str) -> Schedule:
        made = Schedule(
            id=f"sch-{tenant}",
            tenant=tenant,
            name="nightly",
            expression="cron(0 3 * * ? *)",
            timezone="UTC",
            action=ScheduleAction.RESCAN,
            prefix=f"uploads/{tenant}/",
            created_by="api:operator",
            created_at=NOW,
            updated_at=NOW,
        )
        self.schedules.create(made)
        self.schedules.arm(made)
        return made

    def run_to_the_end(self, operation_id: str, *, most: int = 100) -> Operation:
        """Each message the queue holds, advanced in turn, as the operations function does."""
        for _ in range(most):
            if not self.queue.sent:
                break
            advanced = self.operations.advance(self.queue.sent.pop(0))
            assert advanced is not None
        found = self.store.get(operation_id)
        assert found is not None and found.finished
        return found

    def erase(self, tenant: str, key: str | None = None, reason: str = "contract ended") -> str:
        command = EraseTenant(tenant, reason, dry_run=False, idempotency_key=key)
        return self.operations.erase_tenant(OPERATOR, command).operation.id


@pytest.fixture
def world() -> World:
    jobs = InMemoryJobStore()
    files = InMemoryFileStore(jobs)
    buckets, settings, schedules, log = Buckets(), Settings(), Schedules(), Log()
    store, queue = Operations(), Queue()
    lifecycle = FileLifecycle(
        files,
        jobs,
        UploadVersionsPort(buckets),
        OutputsPort(buckets),
        RecordingDispatcher,
        retention=KEEP,
        erasures=log,
        purges=log,
        clock=lambda: NOW,
    )
    erasure = TenantErasure(
        lifecycle=lifecycle,
        objects=TenantObjectsPort(buckets),
        settings=settings,
        schedules=schedules,
        scheduler=lambda: schedules,
    )
    api = StatusApi(
        jobs=jobs, files=files, dispatcher=RecordingDispatcher, retention=KEEP, clock=lambda: NOW
    )
    operations = BulkOperations(
        store=store,
        queue=lambda: queue,
        status_api=api,
        tenant_erasure=lambda: erasure,
        clock=lambda: NOW,
    )
    return World(jobs, files, buckets, settings, schedules, store, queue, log, operations)


# --- the specifications -------------------------------------------------------------------------


def test_erasing_a_tenant_removes_its_files_settings_and_remains_and_nothing_else(
    world: World,
) -> None:
    leaving = [world.upload(LEAVING, f"doc-{n}.png") for n in range(120)]  # three pages
    world.upload(LEAVING, "doc-0.png", version="v2")  # a second version of one key
    staying = world.upload(STAYING, "photo.png")
    world.buckets.uploads[f"uploads/{LEAVING}/refused.exe"] = ["v1", "v0"]  # never ingested
    world.buckets.quarantine.add(f"quarantine/{LEAVING}/f1/virus.exe")
    world.buckets.outputs.add(f"derived/{LEAVING}/late-writer/thumbnail_generation/out")
    world.schedule(LEAVING)
    world.schedule(STAYING)
    world.settings.kept[LEAVING] = {"webhook_endpoints": 2, "webhook_deliveries": 7, "presets": 1}
    world.settings.kept[STAYING] = {"webhook_endpoints": 1}

    preview = world.operations.preview_erasure(OPERATOR, LEAVING)
    done = world.run_to_the_end(world.erase(LEAVING))

    assert (preview.files, preview.exact) == (121, True)
    assert done.status is OperationStatus.SUCCEEDED and done.action is Action.ERASE
    assert done.matched == 121
    # 121 file records over 120 keys: the second version of a key went with the first
    assert (done.progress.processed, done.progress.changed, done.progress.errors) == (121, 120, 0)
    assert done.progress.skipped == 1
    assert world.buckets.under(f"uploads/{LEAVING}/") == []
    assert world.buckets.under(f"derived/{LEAVING}/") == []
    assert world.buckets.under(f"quarantine/{LEAVING}/") == []
    assert world.files.files_of_tenant(LEAVING).files == []
    assert all(world.jobs.jobs_of_file(f.id) == [] for f in leaving)
    assert [s.tenant for s in world.schedules.of_tenant(None)] == [STAYING]
    assert world.schedules.armed == {f"sch-{STAYING}"}
    assert LEAVING not in world.settings.kept
    assert done.removed == {
        "schedules": 1,
        "webhook_endpoints": 2,
        "webhook_deliveries": 7,
        "presets": 1,
        "upload_versions": 123,  # 121 ingested versions, 2 of a refused upload
        "outputs": OUTPUTS_PER_FILE * 121 + 1,  # each file's jobs' own, and a late writer's
        "jobs": OUTPUTS_PER_FILE * 121,
        "quarantined_versions": 1,
    }
    # one audit record per erased upload, each naming the operation, none a key
    assert len(world.log.erasures) == 120
    assert {e.operation_id for e in world.log.erasures} == {done.id}
    assert all("uploads/" not in str(e.to_dict()) for e in world.log.erasures)
    # the other tenant untouched
    assert world.files.get(staying.id) == staying
    assert world.buckets.under(f"uploads/{STAYING}/") == [staying.key]
    assert world.settings.kept[STAYING] == {"webhook_endpoints": 1}


def test_the_counts_of_outputs_and_jobs_are_each_files_own(world: World) -> None:
    stored = world.upload(LEAVING, "one.png")
    jobs = len(world.jobs.jobs_of_file(stored.id))

    done = world.run_to_the_end(world.erase(LEAVING))

    assert done.removed["jobs"] == jobs
    assert done.removed["outputs"] == jobs  # one output per job, in this world
    assert done.removed["upload_versions"] == 1


def test_only_an_operator_may_erase_a_tenant(world: World) -> None:
    world.upload(LEAVING, "a.png")
    tenant = Caller(tenant=LEAVING, operator=False)
    command = EraseTenant(LEAVING, "leaving", dry_run=False, idempotency_key=None)

    with pytest.raises(ForbiddenError):
        world.operations.erase_tenant(tenant, command)
    with pytest.raises(ForbiddenError):
        world.operations.preview_erasure(tenant, LEAVING)
    assert world.store.stored == {} and world.queue.sent == []


def test_an_idempotency_key_starts_one_erasure_and_refuses_another_request(world: World) -> None:
    first = world.erase(LEAVING, key="leaving-2026-12")
    again = world.erase(LEAVING, key="leaving-2026-12")

    assert again == first and len(world.store.stored) == 1
    with pytest.raises(ConflictError):
        world.erase(LEAVING, key="leaving-2026-12", reason="another reason")


def test_a_page_that_dies_before_its_record_leaves_nothing_and_erases_nothing_twice(
    world: World,
) -> None:
    for n in range(60):  # two pages of files
        world.upload(LEAVING, f"doc-{n}.png")
    operation_id = world.erase(LEAVING)
    world.operations.advance(world.queue.sent.pop(0))  # the settings
    # the first page of files erased, then the function dies before recording it
    world.store.crash_next = True
    with pytest.raises(TimeoutError):
        world.operations.advance(world.queue.sent[0])

    done = world.run_to_the_end(operation_id)  # SQS delivers the page again

    assert done.status is OperationStatus.SUCCEEDED and done.progress.errors == 0
    assert world.files.files_of_tenant(LEAVING).files == []
    assert world.buckets.under(f"uploads/{LEAVING}/") == []
    # each file erased once, with one audit record; the redone page read what was left, so the
    # operation counts the pages it recorded (the audit records count every file)
    assert len(world.log.erasures) == 60
    assert len({e.file_ids for e in world.log.erasures}) == 60
    assert (done.progress.processed, done.progress.changed) == (10, 10)


def test_remains_are_deleted_a_batch_a_page_until_none_is_left(world: World) -> None:
    versions = [f"v{n}" for n in range(REMAINS_BATCH + 10)]
    world.buckets.uploads[f"uploads/{LEAVING}/never-ingested.bin"] = versions

    done = world.run_to_the_end(world.erase(LEAVING))

    assert done.removed["upload_versions"] == REMAINS_BATCH + 10
    assert world.buckets.under(f"uploads/{LEAVING}/") == []


def test_an_erasure_cursor_says_its_stage_and_reads_back() -> None:
    step = ErasureStep(Stage.FILES, after=("uploads/leaving/a.png", "f1"))
    assert ErasureStep.from_cursor(step.to_cursor()) == step
    assert ErasureStep.from_cursor(None) == ErasureStep(Stage.SETTINGS)
