"""A file's life follows its object in S3 (domain/file_lifecycle.py, services/file_lifecycle.py),
on in-memory ports: deletes, delete markers, restores, and erasure."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.access import Caller
from filejobs.domain import keys, transitions
from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.file_lifecycle import (
    FOLLOW_AGAIN_AFTER,
    FOLLOWS_S3,
    DeletionReason,
    Erasure,
    KeyVersions,
    ObjectRemoved,
    OutputsPurge,
    RemovalKind,
    Restore,
    Withdraw,
    follow_s3,
)
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.transition_result import Applied
from filejobs.services.errors import NotFoundError
from filejobs.services.file_lifecycle import FileLifecycle
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
KEEP = timedelta(days=30)
BUCKET = "uploads-bucket"
KEY = "uploads/acme/photo.jpg"


def recorded(
    version: str, status: FileStatus = FileStatus.ACTIVE, reason: str | None = None
) -> StoredFile:
    stored = ingest_plan(NOW, version_id=version).file
    return replace(stored, status=status, status_reason=reason)


# --- the rules -----------------------------------------------------------------------------------


def test_a_delete_marker_deletes_the_file_of_the_version_it_hides_and_no_older_one() -> None:
    old, current = recorded("v1"), recorded("v2")
    changes = follow_s3([current, old], KeyVersions(("v2", "v1"), marker_on_top=True))
    assert changes == [Withdraw(current, DeletionReason.DELETE_MARKER)]


def test_a_version_deleted_for_good_deletes_its_file() -> None:
    old, current = recorded("v1"), recorded("v2")
    changes = follow_s3([current, old], KeyVersions(("v2",), marker_on_top=False))
    assert changes == [Withdraw(old, DeletionReason.VERSION_DELETED)]


def test_the_marker_deleted_again_restores_the_file_it_hid() -> None:
    hidden = recorded("v2", FileStatus.DELETED, DeletionReason.DELETE_MARKER.value)
    assert follow_s3([hidden], KeyVersions(("v2", "v1"), marker_on_top=False)) == [Restore(hidden)]


def test_a_file_deleted_for_good_is_never_restored() -> None:
    gone = recorded("v2", FileStatus.DELETED, DeletionReason.VERSION_DELETED.value)
    assert follow_s3([gone], KeyVersions(("v1",), marker_on_top=False)) == []


def test_a_hidden_file_whose_version_is_then_deleted_can_no_longer_be_restored() -> None:
    hidden = recorded("v2", FileStatus.DELETED, DeletionReason.DELETE_MARKER.value)
    changes = follow_s3([hidden], KeyVersions(("v1",), marker_on_top=True), named="v2")
    assert changes == [Withdraw(hidden, DeletionReason.VERSION_DELETED)]
    assert changes[0].marks  # type: ignore[union-attr]


def test_quarantined_and_rejected_files_are_left_as_they_are() -> None:
    quarantined = recorded("v1", FileStatus.QUARANTINED, "Eicar-Signature")
    rejected = recorded("v2", FileStatus.REJECTED, "over quota")
    assert follow_s3([rejected, quarantined], KeyVersions((), marker_on_top=False)) == []


def test_an_infected_file_whose_version_the_scan_moved_out_is_left_to_the_scan() -> None:
    # given the scan recorded the infection, moved the version out, and has not yet marked the
    # file quarantined when the move's own ObjectRemoved notification is followed
    infected = replace(recorded("v1"), scan_status=ScanStatus.INFECTED)
    # then the file is not marked deleted: the scan's quarantine write (on an active file) wins
    assert follow_s3([infected], KeyVersions((), marker_on_top=False)) == []


def test_an_unversioned_object_is_its_null_version() -> None:
    stored = replace(recorded("v1"), version_id=None)
    assert follow_s3([stored], KeyVersions(("null",), marker_on_top=False)) == []
    assert follow_s3([stored], KeyVersions((), marker_on_top=False)) == [
        Withdraw(stored, DeletionReason.VERSION_DELETED)
    ]


# --- the use case on in-memory ports ------------------------------------------------------------


@dataclass
class Bucket:
    """The uploads bucket's versions of each key, newest first, and its delete markers."""

    versions: dict[str, list[str]] = field(default_factory=dict)
    markers: dict[str, bool] = field(default_factory=dict)
    erased: list[str] = field(default_factory=list)

    def versions_of(self, bucket: str, key: str) -> KeyVersions:
        return KeyVersions(tuple(self.versions.get(key, [])), self.markers.get(key, False))

    def delete_all(self, bucket: str, key: str) -> int:
        self.erased.append(key)
        return len(self.versions.pop(key, [])) + int(self.markers.pop(key, False))


@dataclass
class VersionsPort:
    bucket: Bucket

    def versions(self, bucket: str, key: str) -> KeyVersions:
        return self.bucket.versions_of(bucket, key)

    def delete_all(self, bucket: str, key: str) -> int:
        return self.bucket.delete_all(bucket, key)

    def delete_version(self, bucket: str, key: str, version_id: str) -> None:
        self.bucket.versions[key].remove(version_id)


@dataclass
class Outputs:
    keys: set[str] = field(default_factory=set)

    def delete_all(self, tenant: str, file_id: str) -> int:
        gone = {k for k in self.keys if k.startswith(keys.derived_prefix(tenant, file_id))}
        self.keys -= gone
        return len(gone)


@dataclass
class Purges:
    asked: list[OutputsPurge] = field(default_factory=list)
    again: list[tuple[ObjectRemoved, timedelta]] = field(default_factory=list)

    def purge_later(self, purge: OutputsPurge) -> None:
        self.asked.append(purge)

    def follow_later(self, removed: ObjectRemoved, delay: timedelta) -> None:
        self.again.append((removed, delay))


@dataclass
class Quarantine:
    copies: dict[str, int] = field(default_factory=dict)  # file id -> versions of its copy

    def delete_all(self, tenant: str, file_id: str) -> int:
        return self.copies.pop(file_id, 0)


@dataclass
class Erasures:
    kept: list[Erasure] = field(default_factory=list)

    def record(self, erasure: Erasure) -> None:
        self.kept.append(erasure)


@dataclass
class World:
    jobs: InMemoryJobStore
    files: InMemoryFileStore
    bucket: Bucket
    outputs: Outputs
    purges: Purges
    erasures: Erasures
    quarantine: Quarantine
    sent: RecordingDispatcher
    lifecycle: FileLifecycle

    def upload(self, version: str) -> StoredFile:
        plan = ingest_plan(NOW, "image/png", version_id=version)
        self.files.record_ingest(plan)
        self.bucket.versions.setdefault(KEY, []).insert(0, version)
        return plan.file

    def job(self, stored: StoredFile, job_type: JobType) -> ProcessingJob:
        return next(j for j in self.jobs.jobs_of_file(stored.id) if j.job_type is job_type)

    def complete_thumbnail(self, stored: StoredFile) -> str:
        job = self.job(stored, JobType.THUMBNAIL_GENERATION)
        key = keys.derived_key(stored.tenant, stored.id, job.job_type, "thumb-256.webp")
        claim = transitions.claim(now=NOW, lease=timedelta(minutes=5), worker="w1")
        claimed = self.jobs.apply(job.id, job.job_type, claim)
        assert isinstance(claimed, Applied)
        running = claimed.job
        done = transitions.complete(running, result={"key": key}, now=NOW, retention=KEEP)
        self.jobs.apply(job.id, job.job_type, done)
        self.outputs.keys.add(key)
        return key

    def removed(self, kind: RemovalKind, version: str | None = None) -> ObjectRemoved:
        return ObjectRemoved(BUCKET, KEY, kind, version_id=version)


@pytest.fixture
def world() -> World:
    jobs = InMemoryJobStore()
    files = InMemoryFileStore(jobs)
    bucket, outputs, purges, erasures = Bucket(), Outputs(), Purges(), Erasures()
    quarantine = Quarantine()
    sent = RecordingDispatcher()
    lifecycle = FileLifecycle(
        files,
        jobs,
        VersionsPort(bucket),
        outputs,
        lambda: sent,
        retention=KEEP,
        erasures=erasures,
        purges=purges,
        quarantined=quarantine,
        clock=lambda: NOW,
    )
    return World(jobs, files, bucket, outputs, purges, erasures, quarantine, sent, lifecycle)


def test_a_delete_marker_deletes_the_file_cancels_its_jobs_and_removes_its_outputs(
    world: World,
) -> None:
    stored = world.upload("v1")
    thumbnail = world.complete_thumbnail(stored)
    world.bucket.markers[KEY] = True

    world.lifecycle.follow(world.removed(RemovalKind.DELETE_MARKER_CREATED, "m1"))

    after = world.files.get(stored.id)
    assert after is not None
    assert after.status is FileStatus.DELETED
    assert after.status_reason == DeletionReason.DELETE_MARKER.value
    assert after.metadata.updated_by == FOLLOWS_S3
    assert after.metadata.deleted_at is None  # still shown, as deleted
    assert thumbnail not in world.outputs.keys
    still_open = [j for j in world.jobs.jobs_of_file(stored.id) if not j.status.is_terminal]
    assert still_open == []
    cancelled = [j for j in world.jobs.jobs_of_file(stored.id) if j.status is JobStatus.CANCELLED]
    assert cancelled and all(j.cancelled_by == FOLLOWS_S3 for j in cancelled)
    assert world.purges.asked == [OutputsPurge(stored.tenant, stored.id)]


def test_removals_read_in_either_order_reach_the_same_state(world: World) -> None:
    """The marker made, then deleted again: S3 says both, in any order; both read S3 now."""
    stored = world.upload("v1")
    marker = world.removed(RemovalKind.DELETE_MARKER_CREATED, "m1")
    unmarked = world.removed(RemovalKind.VERSION_DELETED, "m1")
    # Both happened before either notification is read: the key is as it was.
    world.lifecycle.follow(unmarked)
    world.lifecycle.follow(marker)
    after = world.files.get(stored.id)
    assert after is not None and after.status is FileStatus.ACTIVE
    assert world.sent.sent_ids == []


def test_deleting_the_marker_restores_the_file_and_runs_again_what_the_deletion_undid(
    world: World,
) -> None:
    stored = world.upload("v1")
    world.complete_thumbnail(stored)
    world.bucket.markers[KEY] = True
    world.lifecycle.follow(world.removed(RemovalKind.DELETE_MARKER_CREATED, "m1"))
    world.bucket.markers[KEY] = False

    world.lifecycle.follow(world.removed(RemovalKind.VERSION_DELETED, "m1"))
    world.lifecycle.follow(world.removed(RemovalKind.VERSION_DELETED, "m1"))  # a duplicate

    after = world.files.get(stored.id)
    assert after is not None
    assert after.status is FileStatus.ACTIVE and after.status_reason is None
    again = [j for j in world.jobs.jobs_of_file(stored.id) if j.triggered_by == FOLLOWS_S3]
    # Every job type the file had: the thumbnail completed with an output, the rest cancelled.
    assert sorted(j.job_type for j in again) == sorted(stored_types(world, stored))
    assert all(j.status is JobStatus.PENDING for j in again)
    assert sorted(world.sent.sent_ids) == sorted(j.id for j in again)


def stored_types(world: World, stored: StoredFile) -> set[JobType]:
    return {j.job_type for j in world.jobs.jobs_of_file(stored.id) if j.triggered_by != FOLLOWS_S3}


def test_a_later_purge_deletes_what_a_late_writer_left_unless_the_file_came_back(
    world: World,
) -> None:
    stored = world.upload("v1")
    world.bucket.versions[KEY] = []
    world.lifecycle.follow(world.removed(RemovalKind.VERSION_DELETED, "v1"))
    late = keys.derived_key(stored.tenant, stored.id, JobType.COMPRESSION, "copy.zst")
    world.outputs.keys.add(late)  # a worker that was running uploads after the deletion

    assert world.lifecycle.purge(world.purges.asked[-1]) == 1
    assert late not in world.outputs.keys

    restored = world.upload("v2")
    output = world.complete_thumbnail(restored)
    assert world.lifecycle.purge(OutputsPurge(restored.tenant, restored.id)) == 0
    assert output in world.outputs.keys


def test_erasing_an_upload_removes_every_version_output_job_and_record(world: World) -> None:
    first, second = world.upload("v1"), world.upload("v2")
    world.complete_thumbnail(first)
    world.complete_thumbnail(second)
    world.quarantine.copies[first.id] = 2  # say its first scan quarantined a copy, kept twice
    job_count = len(world.jobs.jobs_of_file(first.id)) + len(world.jobs.jobs_of_file(second.id))

    erasure = world.lifecycle.erase(Caller(tenant="acme", operator=False), second.id)

    assert world.files.get(first.id) is None and world.files.get(second.id) is None
    assert world.jobs.jobs_of_file(first.id) == [] and world.jobs.jobs_of_file(second.id) == []
    assert world.outputs.keys == set()
    assert world.bucket.erased == [KEY]
    assert erasure.versions_deleted == 2
    assert erasure.outputs_deleted == 2
    assert erasure.jobs_erased == job_count
    assert (erasure.quarantined_copies_deleted, world.quarantine.copies) == (2, {})
    assert erasure.file_ids == tuple(sorted([first.id, second.id]))
    assert erasure.erased_by == "api:tenant:acme"
    assert world.erasures.kept == [erasure]
    assert KEY not in str(erasure.to_dict())  # the audit record holds nothing of the file
    with pytest.raises(NotFoundError):
        world.lifecycle.erase(Caller(tenant="acme", operator=False), second.id)


def test_another_tenant_cannot_erase_a_file_nor_learn_it_exists(world: World) -> None:
    stored = world.upload("v1")
    with pytest.raises(NotFoundError):
        world.lifecycle.erase(Caller(tenant="globex", operator=False), stored.id)
    assert world.files.get(stored.id) is not None
    assert world.bucket.erased == []


def test_a_delete_marker_read_before_its_upload_is_ingested_is_read_again_until_it_is(
    world: World,
) -> None:
    # given an upload hidden by a delete marker before the ingest recorded it
    world.bucket.versions[KEY] = ["v1"]
    world.bucket.markers[KEY] = True
    marker = world.removed(RemovalKind.DELETE_MARKER_CREATED, "m1")
    # when its removal is read, then it is read again soon, nothing else done
    assert world.lifecycle.follow(marker) == []
    [(again, delay)] = world.purges.again
    assert (again.attempt, delay) == (2, FOLLOW_AGAIN_AFTER[0])
    # when the ingest then records the file, and the removal is read again
    plan = ingest_plan(NOW, "image/png", version_id="v1")
    world.files.record_ingest(plan)
    world.lifecycle.follow(again)
    # then the file is deleted as any other
    after = world.files.get(plan.file.id)
    assert after is not None and after.status is FileStatus.DELETED
    assert len(world.purges.again) == 1


def test_a_removal_of_what_was_never_recorded_is_read_again_a_bounded_number_of_times(
    world: World,
) -> None:
    world.bucket.versions[KEY] = ["v1"]
    world.bucket.markers[KEY] = True
    removal = world.removed(RemovalKind.DELETE_MARKER_CREATED, "m1")
    while True:
        world.lifecycle.follow(removal)
        if not world.purges.again or world.purges.again[-1][0] == removal:
            break
        removal = world.purges.again[-1][0]
    assert [delay for _, delay in world.purges.again] == list(FOLLOW_AGAIN_AFTER)
    # and nothing hidden (a key erased, a marker deleted since): never read again
    world.purges.again.clear()
    world.bucket.markers[KEY] = False
    world.lifecycle.follow(world.removed(RemovalKind.VERSION_DELETED, "m1"))
    assert world.purges.again == []
