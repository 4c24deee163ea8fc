"""Near duplicates of an image (services/similar_images.py) on the in-memory ports: asked for by
the thumbnail job's options, reported from the tenant's own active images, the image then
listed for the next ones; never another tenant's, never the image itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.file import FileStatus
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.similar_images import MAX_BUCKET_MEMBERS
from filejobs.domain.time import utcnow
from filejobs.processors.base import Work
from filejobs.services.similar_images import NearDuplicates
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, InMemoryNearDuplicateIndex

PHOTO = "8f3c5a1e9b7d2c40"
COPY = "8f3c5a1e9b7d2c41"  # one bit away
OTHER = "70c3a5e164829dbf"  # far from both


class Store:
    """The fakes, and the thumbnail job of each image recorded in them."""

    def __init__(self) -> None:
        self.files = InMemoryFileStore(InMemoryJobStore())
        self.index = InMemoryNearDuplicateIndex()

    def image(self, name: str, tenant: str = "acme") -> ProcessingJob:
        plan = ingest_plan(utcnow(), "image/png", name=name, tenant=tenant)
        self.files.record_ingest(plan)
        return next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)

    def run(
        self, job: ProcessingJob, hash_hex: str | None, tmp: Path, **options: Any
    ) -> dict[str, Any]:
        """The use case over a thumbnail processor that answers this hash."""

        def thumbnails(_: Work) -> dict[str, Any]:
            found: dict[str, Any] = {"thumbnails": []}
            if hash_hex is not None:
                found["perceptual_hash"] = {"algorithm": "phash", "value": hash_hex}
            return found

        job.input_data = {**(job.input_data or {}), **options}
        work = Work(job, lambda: False, tmp, outputs=None)  # type: ignore[arg-type]
        return NearDuplicates(thumbnails, self.index, self.files)(work)


@pytest.fixture
def store() -> Store:
    return Store()


def test_a_copy_finds_the_tenant_s_image_it_was_made_from(store: Store, tmp_path: Path) -> None:
    # given a photo processed, then an unrelated one, then a resized copy of the first
    photo, other, copy = (store.image(n) for n in ("a.png", "b.png", "c.png"))
    first = store.run(photo, PHOTO, tmp_path, similar_images=True)
    unrelated = store.run(other, OTHER, tmp_path, similar_images=True)
    found = store.run(copy, COPY, tmp_path, similar_images=True)
    # then the first had nothing to find, the unrelated one neither, and the copy its original
    assert first["similar_images"] == unrelated["similar_images"] == []
    assert found["similar_images"] == [{"file_id": photo.file_id, "distance": 1}]
    # and running the copy again answers the same and lists it once
    assert store.run(copy, COPY, tmp_path, similar_images=True) == found
    assert store.index.hashes == {
        ("acme", photo.file_id): PHOTO,
        ("acme", other.file_id): OTHER,
        ("acme", copy.file_id): COPY,
    }


def test_nothing_is_looked_for_or_listed_unless_the_job_asks(store: Store, tmp_path: Path) -> None:
    job = store.image("a.png")
    for options in ({}, {"similar_images": False}):
        assert "similar_images" not in store.run(job, PHOTO, tmp_path, **options)
    assert store.index.buckets == {}


def test_another_tenant_s_image_is_never_found(store: Store, tmp_path: Path) -> None:
    theirs, ours = store.image("a.png", tenant="globex"), store.image("a.png")
    store.run(theirs, PHOTO, tmp_path, similar_images=True)
    assert store.run(ours, PHOTO, tmp_path, similar_images=True)["similar_images"] == []


@pytest.mark.parametrize("status", [FileStatus.DELETED, FileStatus.QUARANTINED])
def test_an_image_no_longer_active_is_not_offered(
    store: Store, tmp_path: Path, status: FileStatus
) -> None:
    gone, copy = store.image("a.png"), store.image("b.png")
    store.run(gone, PHOTO, tmp_path, similar_images=True)
    stored = store.files.get(gone.file_id)
    assert stored is not None
    store.files.put(replace(stored, status=status))
    assert store.run(copy, COPY, tmp_path, similar_images=True)["similar_images"] == []


def test_an_image_without_a_perceptual_hash_is_left_as_its_thumbnails_made_it(
    store: Store, tmp_path: Path
) -> None:
    job = store.image("a.png")
    assert "similar_images" not in store.run(job, None, tmp_path, similar_images=True)
    assert store.index.buckets == {}


def test_a_full_bucket_takes_no_more_but_the_image_is_still_compared(
    store: Store, tmp_path: Path
) -> None:
    # given the original photo listed, then its buckets filled to the cap by other images
    photo = store.image("a.png")
    store.run(photo, PHOTO, tmp_path, similar_images=True)
    for n in range(MAX_BUCKET_MEMBERS - 1):
        store.index.add("acme", f"filler-{n}", PHOTO)
    # when a copy, which shares three of the photo's four buckets, is processed
    copy = store.image("c.png")
    found = store.run(copy, COPY, tmp_path, similar_images=True)["similar_images"]
    # then it still finds the photo, and is listed only in the one bucket with room
    assert found == [{"file_id": photo.file_id, "distance": 1}]
    assert sum(copy.file_id in members for members in store.index.buckets.values()) == 1
