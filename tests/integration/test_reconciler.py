"""The reconciler (functions/reconciler, services/reconciler.py): an upload no S3 notification
announced is found by the next scheduled run and ingested through the fair ingest queue, as the
ingest router would have sent it; one already recorded, one still within its grace and a deleted
one are left alone. On moto resources built from template.yaml."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from functions.ingest import app as ingest
from functions.ingest_router import app as ingest_router
from functions.reconciler import app as reconciler
from tests.integration import test_handlers as handlers
from tests.integration.test_definitions_handler import metrics
from tests.integration.test_handlers import FakeContext, Stack, invoke, receive
from tests.integration.test_ingest_router import group_of, keys_in, upload

stack = handlers.stack
SCHEDULE_EVENT = {"source": "aws.scheduler", "detail-type": "Scheduled Event", "detail": {}}


@pytest.fixture
def reconciled(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The stack, with the router's and the reconciler's environment, S3's test event routed."""
    monkeypatch.setenv("FAIR_INGEST_QUEUE_URL", stack.queue("FairIngestQueue"))
    monkeypatch.setenv("UPLOADS_BUCKET", stack.uploads)
    runtime.reset()
    assert invoke(ingest_router.handler, receive(stack, "IngestQueue")) == []
    assert invoke(ingest.handler, receive(stack, "FairIngestQueue")) == []
    return stack


def ingested_as_ever(stack: Stack) -> None:
    """S3's notifications routed and ingested."""
    assert invoke(ingest_router.handler, receive(stack, "IngestQueue")) == []
    assert invoke(ingest.handler, receive(stack, "FairIngestQueue")) == []


def modified_at(stack: Stack, key: str) -> datetime:
    modified: datetime = stack.s3.head_object(Bucket=stack.uploads, Key=key)["LastModified"]
    return modified


def recorded(stack: Stack, key: str) -> bool:
    return bool(FileRepository().versions_of(stack.uploads, key))


def test_an_upload_whose_notification_was_dropped_is_found_ingested_and_counted(
    reconciled: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given one upload recorded as ever, and one whose notification never reached the router
    upload(reconciled, "acme", "announced.txt")
    ingested_as_ever(reconciled)
    lost = upload(reconciled, "globex", "lost notification.txt")
    assert len(receive(reconciled, "IngestQueue")) == 1  # dropped: nobody routes it
    # when the scheduled run comes (no grace: both are old enough)
    monkeypatch.setenv("RECONCILE_GRACE_SECONDS", "0")
    capsys.readouterr()
    summary = reconciler.handler(SCHEDULE_EVENT, FakeContext())
    # then it found the one upload the files table lacks, and said so in its metric
    assert summary["checked"] == 2
    assert summary["unannounced"] == 1
    assert metrics(capsys.readouterr().out)["UnannouncedUploads"] == 1
    # and sent S3's notification of it to the fair ingest queue, in its tenant's group
    (sent,) = receive(reconciled, "FairIngestQueue")
    assert group_of(sent) == "globex"
    assert keys_in(sent) == [lost]
    # which the ingest records as it records S3's own
    assert invoke(ingest.handler, [sent]) == []
    assert recorded(reconciled, lost)
    # and the next run finds nothing missing, and sends nothing
    assert reconciler.handler(SCHEDULE_EVENT, FakeContext())["unannounced"] == 0
    assert receive(reconciled, "FairIngestQueue") == []


def test_an_upload_within_its_grace_is_left_to_its_notification(reconciled: Stack) -> None:
    # given an upload whose notification has not been handled yet
    key = upload(reconciled, "acme", "just now.txt")
    uploaded = modified_at(reconciled, key)
    # when a run comes within the 2-minute grace, nothing is sent
    early = reconciler.reconciler(clock=lambda: uploaded + timedelta(seconds=90)).run()
    assert (early.too_young, early.unannounced) == (1, ())
    assert receive(reconciled, "FairIngestQueue") == []
    # and once the grace is over and still nothing recorded it, the run announces it
    late = reconciler.reconciler(clock=lambda: uploaded + timedelta(minutes=3)).run()
    assert [c.version.key for c in late.unannounced] == [key]
    # but a run after the look-back window (2 x 15 minutes + the grace) no longer lists it
    gone = reconciler.reconciler(clock=lambda: uploaded + timedelta(minutes=33)).run()
    assert (gone.checked, gone.unannounced) == (0, ())


def test_a_deleted_upload_is_not_missing(reconciled: Stack) -> None:
    # given an upload deleted before anything recorded it (its version now noncurrent, under a
    # delete marker)
    key = upload(reconciled, "acme", "deleted.txt")
    uploaded = modified_at(reconciled, key)
    reconciled.s3.delete_object(Bucket=reconciled.uploads, Key=key)
    # when a run comes, nothing is announced
    report = reconciler.reconciler(clock=lambda: uploaded + timedelta(minutes=3)).run()
    assert report.listed == 1
    assert report.unannounced == ()
