"""Near duplicates: a tenant's images whose perceptual hash is within a few bits of a new
image's, found without reading the tenant's other files.

The hash is 64 bits (processors/image_facts.py: a DCT perceptual hash, as `imagehash.phash`);
a resized or re-encoded copy of a photo differs from it in a few bits, an unrelated photo in
about half. The index (multi-index hashing, Norouzi et al.) cuts each hash into 4 bands of 16
bits; each band's value names a bucket of the tenant's, holding its images' ids and hashes.
Two hashes within 7 bits of each other have a band that differs in at most one bit (4 bands of
at most 1 would be 8 bits or more: pigeonhole), so looking in each band's own bucket and the 16
buckets one bit away from it (4 x 17 = 68 buckets, one BatchGetItem) finds every image within
NEAR_BITS, whatever the tenant's size; the whole hashes found are then compared.

Images that are nearly blank (one colour, a white page) hash alike whatever they show: they
are reported as near each other, which they are, to the eye.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

HASH_BITS: Final = 64
BANDS: Final = 4
BAND_BITS: Final = HASH_BITS // BANDS
# Found for certain within this many differing bits (see above); reported within it.
NEAR_BITS: Final = 7
# At most this many are reported, nearest first: a file view stays small.
MAX_REPORTED: Final = 10
# A bucket holds at most this many images; a tenant's bucket past it (thousands of near-blank
# images) takes no more, and an image it refuses is still compared, only not found later.
MAX_BUCKET_MEMBERS: Final = 200
_HASH: Final = re.compile(r"[0-9a-f]{16}")
_BAND_MASK: Final = (1 << BAND_BITS) - 1


class InvalidHashError(ValueError):
    """Not a perceptual hash this index keeps: 16 lowercase hex digits."""


@dataclass(frozen=True)
class Bucket:
    """One band's value: where the tenant's images with that band are listed."""

    band: int
    value: int

    def item_id(self, tenant: str) -> str:
        """Its item's id in the files table: never a file's UUID, never another tenant's."""
        return f"phash#{tenant}#{self.band}#{self.value:04x}"


@dataclass(frozen=True)
class NearImage:
    """Another of the tenant's images, and how many of the 64 bits its hash differs in."""

    file_id: str
    distance: int

    def to_dict(self) -> dict[str, str | int]:
        return {"file_id": self.file_id, "distance": self.distance}


def parsed(hash_hex: str) -> int:
    if not isinstance(hash_hex, str) or not _HASH.fullmatch(hash_hex):
        raise InvalidHashError(f"not a 64-bit perceptual hash in hex: {hash_hex!r}")
    return int(hash_hex, 16)


def own_buckets(hash_hex: str) -> tuple[Bucket, ...]:
    """The image's 4 buckets: where it is listed."""
    value = parsed(hash_hex)
    return tuple(Bucket(band, _band(value, band)) for band in range(BANDS))


def probed_buckets(hash_hex: str) -> tuple[Bucket, ...]:
    """The 68 buckets where every image within NEAR_BITS is listed: each band's own, and the
    16 one bit away from it."""
    found: list[Bucket] = []
    for own in own_buckets(hash_hex):
        found.append(own)
        found.extend(Bucket(own.band, own.value ^ (1 << bit)) for bit in range(BAND_BITS))
    return tuple(found)


def distance(first: str, second: str) -> int:
    return (parsed(first) ^ parsed(second)).bit_count()


def nearest(hash_hex: str, listed: dict[str, str], *, itself: str) -> list[NearImage]:
    """The listed images (file id -> hash) within NEAR_BITS of this one, nearest first (then by
    id, so a re-run answers the same), at most MAX_REPORTED; never the image itself, nor an
    entry whose hash is not one (the index is ours, but a bad entry must not fail a job)."""
    near = []
    for file_id, other in listed.items():
        if file_id == itself or not isinstance(other, str) or not _HASH.fullmatch(other):
            continue
        bits = distance(hash_hex, other)
        if bits <= NEAR_BITS:
            near.append(NearImage(file_id, bits))
    near.sort(key=lambda image: (image.distance, image.file_id))
    return near[:MAX_REPORTED]


def _band(value: int, band: int) -> int:
    return (value >> (BAND_BITS * (BANDS - 1 - band))) & _BAND_MASK
