"""Reading parts of an upload beyond its head, on a strict budget.

Some formats say what they are only away from their first bytes: a ZIP's members are listed at
its end, an OLE2 file's streams in a directory anywhere in it, an MP4's cover art in a `moov` box
that may follow gigabytes of `mdat`. The sniffer reads those few ranges through `ByteRanges` (the
port: S3 ranged GETs in production, bytes in memory in tests) and `BoundedReader` keeps it cheap
and safe whatever the file claims: a handful of reads, a bounded number of bytes, every read
clipped to the object, the head served from memory.
"""

from __future__ import annotations

from typing import Protocol

MAX_EXTRA_READS = 4  # ranged reads beyond the head, per upload
MAX_EXTRA_BYTES = 256 * 1024  # bytes those reads may return in all


class ByteRanges(Protocol):
    """One version of one object, read by ranges."""

    @property
    def size(self) -> int:
        """The object's length in bytes."""
        ...

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` (fewer at the end of the object)."""
        ...


class BytesRanges:
    """ByteRanges over bytes in memory: a whole small file, or a test's sample."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.reads: list[tuple[int, int]] = []  # (offset, length) of each read, for tests

    @property
    def size(self) -> int:
        return len(self._data)

    def read(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        return self._data[offset : offset + length]


class BoundedReader:
    """The head, plus at most `max_reads` ranged reads of at most `max_bytes` in all.

    Reads inside the head or inside a range already fetched cost nothing. A read the budget
    cannot pay for, or one past the object's end, returns fewer bytes than asked (often none):
    every parser treats a short read as a malformed file, so a hostile file costs the budget at
    most and is classified by its coarse type.
    """

    def __init__(
        self,
        head: bytes,
        ranges: ByteRanges | None,
        *,
        max_reads: int = MAX_EXTRA_READS,
        max_bytes: int = MAX_EXTRA_BYTES,
    ) -> None:
        self.head = head
        self._ranges = ranges
        # Without ranges the head is all there is, and it may be cut: its size is unknown.
        self.size: int | None = ranges.size if ranges is not None else None
        self.reads_left = max_reads
        self.bytes_left = max_bytes
        self._fetched: list[tuple[int, bytes]] = [(0, head)]

    @property
    def whole_file_in_head(self) -> bool:
        return self.size is not None and len(self.head) >= self.size

    def read(self, offset: int, length: int, *, window: int = 0) -> bytes:
        """`length` bytes at `offset`; a ranged read fetches `max(length, window)` bytes so
        that the parser's next small reads nearby are free."""
        if offset < 0 or length <= 0:
            return b""
        if self.size is not None:
            length = min(length, self.size - offset)
            if length <= 0:
                return b""
        cached = self._cached(offset, length)
        if cached is not None:
            return cached
        return self._fetch(offset, length, window)

    def _cached(self, offset: int, length: int) -> bytes | None:
        for start, data in self._fetched:
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start : offset - start + length]
        return None

    def _fetch(self, offset: int, length: int, window: int) -> bytes:
        if self._ranges is None or self.size is None or self.reads_left <= 0:
            return b""
        wanted = min(max(length, window), self.size - offset, self.bytes_left)
        if wanted < length:  # over budget: a partial read would only mislead the parser
            return b""
        self.reads_left -= 1
        data = self._ranges.read(offset, wanted)[:wanted]
        self.bytes_left -= len(data)
        self._fetched.append((offset, data))
        return data[:length]
