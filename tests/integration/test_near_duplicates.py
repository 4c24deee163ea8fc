"""Near duplicates on real images: thumbnail_generation's perceptual hash (in the decoder
sandbox), the index in the real FilesTable (moto DynamoDB), the files recorded in it. A resized,
re-encoded copy of a photo finds the photo; an unrelated photo finds nothing; what one image
costs in requests; an erased image leaves nothing of itself in the index."""

from __future__ import annotations

from typing import Any

import pytest

from filejobs.data.file_repository import FileRepository
from filejobs.data.models import ImageBucketModel, ImageHashModel
from filejobs.data.similar_index import SimilarImagesIndex
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.similar_images import NEAR_BITS
from filejobs.processors.thumbnail import ThumbnailProcessor
from filejobs.services.similar_images import NearDuplicates
from tests.aws_requests import counting_requests
from tests.integration.test_image_facts import encoded, photo
from tests.processing import MediaBench


@pytest.fixture
def near(tables: dict[str, str], media: MediaBench) -> NearDuplicates:
    return NearDuplicates(ThumbnailProcessor(media.s3), SimilarImagesIndex(), FileRepository())


def recorded(media: MediaBench, name: str, data: bytes) -> ProcessingJob:
    """The image uploaded and recorded as ingest records it; its thumbnail job, asking for near
    duplicates."""
    plan = media.planned(name, data)
    FileRepository().record_ingest(plan)
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    job.input_data = {**(job.input_data or {}), "similar_images": True}
    return job


def processed(media: MediaBench, near: NearDuplicates, job: ProcessingJob) -> dict[str, Any]:
    return near(media.work_of(job))


def test_a_resized_re_encoded_copy_finds_its_photo_and_an_unrelated_photo_nothing(
    media: MediaBench, near: NearDuplicates
) -> None:
    # given a photo processed, then another photo
    original = photo((1600, 1200), seed=3)
    first = recorded(media, "holiday.jpg", encoded(original, "JPEG", quality=92))
    other = recorded(media, "other.jpg", encoded(photo((1600, 1200), seed=11), "JPEG"))
    assert processed(media, near, first)["similar_images"] == []
    assert processed(media, near, other)["similar_images"] == []
    # when the first photo, resized to 40% and re-encoded as WebP, is uploaded
    small = original.resize((640, 480))
    copy = recorded(media, "holiday-small.webp", encoded(small, "WEBP", quality=60))
    found = processed(media, near, copy)["similar_images"]
    # then it finds the photo it was made from, within reach, and nothing else
    assert [image["file_id"] for image in found] == [first.file_id]
    assert 0 <= found[0]["distance"] <= NEAR_BITS


def test_one_image_costs_one_batch_read_and_five_writes(
    media: MediaBench, near: NearDuplicates
) -> None:
    job = recorded(media, "a.jpg", encoded(photo((800, 600), seed=5), "JPEG"))
    clients = [m._get_connection().connection.client for m in (ImageBucketModel, ImageHashModel)]
    with counting_requests(*clients) as requests:
        processed(media, near, job)
    assert requests.calls == {
        "dynamodb:BatchGetItem": 1,  # its 68 buckets
        "dynamodb:UpdateItem": 4,  # listed in its 4
        "dynamodb:PutItem": 1,  # the hash it was listed under
    }


def test_an_erased_image_leaves_nothing_of_itself_in_the_index(
    media: MediaBench, near: NearDuplicates
) -> None:
    # given two images listed, the second a copy of the first (they share buckets)
    original = photo((1200, 900), seed=8)
    first = recorded(media, "a.jpg", encoded(original, "JPEG"))
    copy = recorded(media, "b.jpg", encoded(original.resize((600, 450)), "JPEG", quality=70))
    processed(media, near, first)
    assert processed(media, near, copy)["similar_images"][0]["file_id"] == first.file_id
    # when the first one's file is erased
    files = FileRepository()
    stored = files.get(first.file_id)
    assert stored is not None and files.erase(stored)
    # then no bucket names it, its hash record is gone, and a bucket it alone held is deleted
    buckets = {
        item.id: set(item.members or ())
        for item in ImageBucketModel.scan(ImageBucketModel.members.exists())
    }
    assert buckets
    assert not any(e.startswith(first.file_id) for entries in buckets.values() for e in entries)
    hashes = [item.id for item in ImageHashModel.scan(ImageHashModel.hash.exists())]
    assert hashes == [f"phash#acme#file#{copy.file_id}"]
    # and a later copy no longer finds it
    again = recorded(media, "c.jpg", encoded(original.resize((500, 375)), "JPEG", quality=80))
    assert [i["file_id"] for i in processed(media, near, again)["similar_images"]] == [copy.file_id]
