"""processors/ranged_source.py: the decoder's file over a socket, served by ranges from the
worker. Here the object is bytes in memory, read through the real socket pair and thread; the
decoder's end is a copy of the descriptor, as the sandbox passes it."""

from __future__ import annotations

import io
import os
import random

import pytest

from filejobs.domain.retry import PermanentError, TransientError
from filejobs.processors.ranged_source import BLOCK, RangeServer, ranged_file

OBJECT = random.Random(48).randbytes(3 * BLOCK + 12345)


class Reads:
    """The object's bytes by range, counting the reads (S3's GETs in production)."""

    def __init__(self, data: bytes, fail_at: int | None = None) -> None:
        self.data = data
        self.fail_at = fail_at
        self.ranges: list[tuple[int, int]] = []

    def __call__(self, offset: int, length: int) -> bytes:
        self.ranges.append((offset, length))
        if self.fail_at is not None and offset <= self.fail_at < offset + length:
            raise TransientError("S3 said SlowDown")
        return self.data[offset : offset + length]


def test_reads_anywhere_give_the_object_s_bytes_and_cost_one_get_a_block() -> None:
    reads = Reads(OBJECT)
    with RangeServer(reads, len(OBJECT)) as server:
        file = ranged_file(os.dup(server.decoder_end), len(OBJECT))
        # the end first (an MP4's index), then the start, then spans across blocks
        for offset, length in [(len(OBJECT) - 5000, 5000), (0, 100), (BLOCK - 10, 50_000)]:
            file.seek(offset)
            assert file.read(length) == OBJECT[offset : offset + length]
        file.seek(-20, io.SEEK_END)
        assert file.read(100) == OBJECT[-20:]  # short at the end
        assert file.read(100) == b""  # and nothing past it
        file.seek(0)
        assert file.read() == OBJECT
        file.close()
    assert server.failure is None
    # every GET is one whole block (the last one shorter), never past the object
    assert all(offset % BLOCK == 0 for offset, _ in reads.ranges)
    assert all(offset + length <= len(OBJECT) for offset, length in reads.ranges)


def test_a_failed_read_is_an_error_for_the_decoder_and_raised_as_itself_in_the_worker() -> None:
    reads = Reads(OBJECT, fail_at=2 * BLOCK + 1)
    with RangeServer(reads, len(OBJECT)) as server:
        file = ranged_file(os.dup(server.decoder_end), len(OBJECT))
        assert file.read(10) == OBJECT[:10]
        file.seek(2 * BLOCK)
        with pytest.raises(OSError, match="could not be read"):
            file.read(10)
        file.close()
    with pytest.raises(TransientError, match="SlowDown"):
        server.raise_failure()


def test_a_decoder_that_reads_without_end_is_cut_off_at_the_job_s_read_budget() -> None:
    reads = Reads(OBJECT)
    with RangeServer(reads, len(OBJECT), max_reads=2) as server:
        file = ranged_file(os.dup(server.decoder_end), len(OBJECT))
        with pytest.raises(OSError, match="could not be read"):
            file.read()  # four blocks: two more than it may read
        file.close()
    assert len(reads.ranges) == 2
    with pytest.raises(PermanentError, match="more of the object than a job may read"):
        server.raise_failure()
