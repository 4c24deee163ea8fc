"""Near duplicates of an image, when its thumbnail job's options ask (`similar_images`): the
tenant's images whose perceptual hash is within a few bits of this one's, then this one listed
for the images after it (domain/similar_images.py: the bands, the buckets, the distance).

It runs in thumbnail_generation, after the thumbnails: the hash comes from the decode the
thumbnails already made (processors/image_facts.py), in the decoder sandbox, behind the scan's
verdict. The deduplication check reads every upload's bytes before any verdict and decodes
nothing, so it cannot see what an image looks like; it keeps finding exact copies.

An image found is reported only while its file is the tenant's and active (a deleted or
quarantined file is not offered as a near duplicate); an erased file is unlisted with it
(data/file_repository.py `erase`).
"""

from __future__ import annotations

from typing import Any

from filejobs.domain.file import FileStatus
from filejobs.domain.job_options import options_of
from filejobs.domain.job_values import JobType
from filejobs.domain.similar_images import (
    InvalidHashError,
    NearImage,
    nearest,
    parsed,
    probed_buckets,
)
from filejobs.ports import FileStore, NearDuplicateIndex
from filejobs.processors.base import Processor, Work

OPTION = "similar_images"


class NearDuplicates:
    def __init__(self, thumbnails: Processor, index: NearDuplicateIndex, files: FileStore) -> None:
        self._thumbnails = thumbnails
        self._index = index
        self._files = files

    def __call__(self, work: Work) -> dict[str, Any]:
        result = self._thumbnails(work)
        if not asked(work):
            return result
        hash_hex = perceptual_hash_of(result)
        if hash_hex is None:
            work.log("similar images: the image has no perceptual hash; none looked for")
            return result
        job = work.job
        listed = self._index.listed(job.tenant, probed_buckets(hash_hex))
        near = [
            image
            for image in nearest(hash_hex, listed, itself=job.file_id)
            if self._still_the_tenants(image, job.tenant)
        ]
        full = self._index.add(job.tenant, job.file_id, hash_hex)
        work.log(_line(near, full))
        return {**result, "similar_images": [image.to_dict() for image in near]}

    def _still_the_tenants(self, image: NearImage, tenant: str) -> bool:
        found = self._files.get(image.file_id, consistent=False)
        return found is not None and found.tenant == tenant and found.status is FileStatus.ACTIVE


def asked(work: Work) -> bool:
    """The job's options say to look (default: not; a stored option the processor read is
    checked again here, a bad one being the thumbnail processor's to refuse first)."""
    chosen = options_of(JobType.THUMBNAIL_GENERATION).read(work.job.input_data)
    return chosen.get(OPTION) is True


def perceptual_hash_of(result: dict[str, Any]) -> str | None:
    found = result.get("perceptual_hash")
    value = found.get("value") if isinstance(found, dict) else None
    if not isinstance(value, str):
        return None
    try:
        parsed(value)
    except InvalidHashError:
        return None
    return value


def _line(near: list[NearImage], full: int) -> str:
    found = (
        "similar images: none within reach"
        if not near
        else "similar images: " + ", ".join(f"{i.file_id} ({i.distance} bits)" for i in near)
    )
    return found + (f"; {full} of its buckets full, not listed there" if full else "")
