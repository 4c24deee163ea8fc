"""The near-duplicate index's rules (domain/similar_images.py): which buckets an image is listed
in, which a new image looks in, and what is near: every image within NEAR_BITS is found, by
construction, whatever the tenant holds."""

from __future__ import annotations

import random

import pytest

from filejobs.domain.similar_images import (
    BAND_BITS,
    BANDS,
    HASH_BITS,
    MAX_REPORTED,
    NEAR_BITS,
    InvalidHashError,
    NearImage,
    distance,
    nearest,
    own_buckets,
    probed_buckets,
)


def flipped(hash_hex: str, bits: list[int]) -> str:
    value = int(hash_hex, 16)
    for bit in bits:
        value ^= 1 << bit
    return f"{value:016x}"


def found_by(new: str, listed: str) -> bool:
    """Whether an image listed under `listed` is in a bucket `new` looks in."""
    return bool(set(own_buckets(listed)) & set(probed_buckets(new)))


def test_an_image_is_listed_in_one_bucket_per_band_of_its_hash() -> None:
    buckets = own_buckets("0123456789abcdef")
    assert [(b.band, b.value) for b in buckets] == [
        (0, 0x0123),
        (1, 0x4567),
        (2, 0x89AB),
        (3, 0xCDEF),
    ]
    assert buckets[2].item_id("acme") == "phash#acme#2#89ab"


def test_a_new_image_looks_in_its_own_buckets_and_those_one_bit_away() -> None:
    probed = probed_buckets("0123456789abcdef")
    assert len(probed) == len(set(probed)) == BANDS * (1 + BAND_BITS) == 68


@pytest.mark.parametrize("seed", range(200))
def test_every_image_within_near_bits_is_found(seed: int) -> None:
    rng = random.Random(seed)
    listed = f"{rng.getrandbits(HASH_BITS):016x}"
    differing = rng.randint(0, NEAR_BITS)
    new = flipped(listed, rng.sample(range(HASH_BITS), differing))
    assert distance(listed, new) == differing
    assert found_by(new, listed)


def test_past_near_bits_an_image_may_be_missed() -> None:
    # two bits differing in each band: 8 bits, no band within one bit of the other's
    listed = "0000000000000000"
    new = flipped(listed, [0, 1, 16, 17, 32, 33, 48, 49])
    assert distance(listed, new) == NEAR_BITS + 1
    assert not found_by(new, listed)


def test_nearest_reports_within_near_bits_nearest_first_never_itself() -> None:
    new = "00000000000000ff"
    listed = {
        "self": new,
        "copy": flipped(new, [0]),
        "resized": flipped(new, [3, 9, 20]),
        "edge": flipped(new, list(range(40, 40 + NEAR_BITS))),
        "other": flipped(new, list(range(40, 40 + NEAR_BITS + 1))),
        "tie-b": flipped(new, [60]),
        "junk": "not a hash",
    }
    assert nearest(new, listed, itself="self") == [
        NearImage("copy", 1),
        NearImage("tie-b", 1),
        NearImage("resized", 3),
        NearImage("edge", NEAR_BITS),
    ]


def test_at_most_max_reported_images_are_reported() -> None:
    new = "0000000000000000"
    listed = {f"file-{n:02d}": flipped(new, [n]) for n in range(MAX_REPORTED + 5)}
    assert len(nearest(new, listed, itself="x")) == MAX_REPORTED


@pytest.mark.parametrize(
    "bad", ["", "0123", "0123456789ABCDEF", "0123456789abcdeg", "0x0123456789abcd"]
)
def test_a_hash_that_is_not_64_bits_of_lowercase_hex_is_refused(bad: str) -> None:
    with pytest.raises(InvalidHashError):
        own_buckets(bad)
