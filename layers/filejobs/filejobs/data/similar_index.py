"""The near-duplicate index in DynamoDB (domain/similar_images.py): per tenant, buckets of
image ids by a band of their perceptual hash, items of FilesTable under `phash#`.

Each bucket's members are a string set of `{file_id}:{hash}`: a map's entry cannot be set
where the map does not exist yet (DynamoDB refuses the document path), where a set's ADD makes
the set. Looking: one BatchGetItem of the 68 buckets a hash probes (eventually consistent: an
image listed a moment ago may be missed, as by an upload a moment later). Listing: one
UpdateItem per own bucket, adding the image's entry (a re-run adds the same), refused by a
bucket at its cap; and one put of the hash the image was listed under, which its erasure reads
to unlist it (an emptied bucket is deleted: nothing of an erased image stays).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pynamodb.exceptions import DeleteError, UpdateError
from pynamodb.expressions.condition import size

from filejobs.data.models import ImageBucketModel, ImageHashModel
from filejobs.domain.similar_images import (
    MAX_BUCKET_MEMBERS,
    Bucket,
    own_buckets,
    parsed,
)

_BATCH_GET_KEYS = 100  # BatchGetItem's limit


def hash_record_id(tenant: str, file_id: str) -> str:
    return f"phash#{tenant}#file#{file_id}"


class SimilarImagesIndex:
    def listed(self, tenant: str, buckets: Iterable[Bucket]) -> dict[str, str]:
        """Every image listed in the buckets: file id -> hash."""
        ids = sorted({bucket.item_id(tenant) for bucket in buckets})
        found: dict[str, str] = {}
        for start in range(0, len(ids), _BATCH_GET_KEYS):
            for item in ImageBucketModel.batch_get(ids[start : start + _BATCH_GET_KEYS]):
                found.update(_members(item))
        return found

    def add(self, tenant: str, file_id: str, hash_hex: str) -> int:
        """The image listed in its own buckets, and its hash recorded; how many of its buckets
        were full (it is not listed there)."""
        parsed(hash_hex)
        full = 0
        entry = member(file_id, hash_hex)
        members = ImageBucketModel.members
        room = (
            members.does_not_exist()
            | members.contains(entry)
            | (_count_of(members) < MAX_BUCKET_MEMBERS)
        )
        for bucket in own_buckets(hash_hex):
            try:
                ImageBucketModel(bucket.item_id(tenant)).update(
                    actions=[members.add({entry})], condition=room
                )
            except UpdateError as error:
                if error.cause_response_code != "ConditionalCheckFailedException":
                    raise
                full += 1
        ImageHashModel(hash_record_id(tenant, file_id), hash=hash_hex).save()
        return full

    def remove(self, tenant: str, file_id: str) -> bool:
        """The image unlisted from its buckets (each left empty deleted) and its hash record
        deleted; False when it was never listed."""
        try:
            record = ImageHashModel.get(hash_record_id(tenant, file_id), consistent_read=True)
        except ImageHashModel.DoesNotExist:
            return False
        entry = member(file_id, record.hash)
        for bucket in own_buckets(record.hash):
            item = ImageBucketModel(bucket.item_id(tenant))
            try:
                item.update(
                    actions=[ImageBucketModel.members.delete({entry})],
                    condition=ImageBucketModel.id.exists(),
                )
            except UpdateError as error:
                if error.cause_response_code != "ConditionalCheckFailedException":
                    raise
                continue  # no such bucket: nothing to unlist
            if not item.members:  # the update answered the item as it is now
                _delete_if_empty(item)
        record.delete()
        return True


def member(file_id: str, hash_hex: str) -> str:
    return f"{file_id}:{hash_hex}"


def _members(item: ImageBucketModel) -> dict[str, str]:
    found = {}
    for entry in item.members or ():
        file_id, _, hash_hex = entry.rpartition(":")
        if file_id:
            found[file_id] = hash_hex
    return found


def _count_of(path: Any) -> Any:
    """DynamoDB's size() of an attribute, in a condition (PynamoDB's `size` is unannotated)."""
    return size(path)  # type: ignore[no-untyped-call]


def _delete_if_empty(item: ImageBucketModel) -> None:
    try:  # DynamoDB removes a set emptied by DELETE: an empty bucket has no members at all
        item.delete(condition=ImageBucketModel.members.does_not_exist())
    except DeleteError as error:
        if error.cause_response_code != "ConditionalCheckFailedException":
            raise  # another image was listed there meanwhile: the bucket stays
