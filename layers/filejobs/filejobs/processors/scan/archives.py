"""Archive members, unpacked in-process under hard limits, for an engine that only sees bytes.

zip, tar and gzip (so tar.gz too) are opened by their bytes, never by their name, and unpacked
member by member into a scratch directory, each streamed in chunks and counted as it is written:
the sizes an archive declares are checked first but never trusted. Nested archives are opened
down to `max_depth`.

A member past a limit is *refused*: it is not scanned, and the walk records why, in words a
person can act on. A refusal never reads as clean (the engines turn it into an ERROR verdict,
the scan into UNSCANNABLE). A zip bomb stops after at most `ratio_floor` plus one chunk of
output, never unpacked fully.

An archive recognised by its bytes that cannot be opened or read to its end (corrupt,
truncated, a compression method we lack) is refused too: its bytes are still scanned as they
are (a detection in them counts), but what it holds was not seen, so it is never CLEAN.
Bytes that merely look like no archive at all are scanned as plain bytes.
"""

from __future__ import annotations

import gzip
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

CHUNK = 64 * 1024  # small reads: a stream that breaks loses at most one read
MiB = 1024 * 1024

type ArchiveKind = Literal["zip", "tar", "gzip"]


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


# What a broken archive raises while it is read. Not OSError: a full scratch disk must fail the
# scan, never pass as "an unreadable archive, scanned as bytes".
_UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    gzip.BadGzipFile,
    zlib.error,
    EOFError,
    NotImplementedError,  # a zip compression method Python lacks
    UnicodeDecodeError,
)


@dataclass(frozen=True)
class ArchiveLimits:
    # Archives inside archives opened: 3 reaches the members of a zip in a zip in a zip.
    max_depth: int = 3
    # Members unpacked in the whole walk, every level counted.
    max_members: int = 10_000
    # Bytes unpacked in the whole walk, every level counted (the scratch disk is the bound).
    max_total_bytes: int = 512 * MiB
    # A compressed member may expand at most this many times its compressed size...
    max_ratio: int = 100
    # ...once it is past this size (small members of repetitive text compress very well).
    ratio_floor: int = 1 * MiB


class LimitExceeded(Exception):  # noqa: N818 (a refusal, the walk's normal way to say no)
    """The walk as a whole went past a limit: nothing more of it is unpacked."""


@dataclass(frozen=True)
class Member:
    """One thing to scan: the file itself, or a member unpacked from it."""

    # Where it sits: "outer.zip!inner.zip!eicar.com".
    name: str
    path: Path
    # 0 for the file itself, 1 for its members, 2 for their members, ...
    depth: int


def kind_of(path: Path) -> ArchiveKind | None:
    """The archive format of a file by its bytes; None for anything else (or a broken zip)."""
    with path.open("rb") as file:
        head = file.read(512)
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    # Finds a zip appended to something else too (a self-extracting executable).
    if zipfile.is_zipfile(path):
        return "zip"
    return None


@dataclass
class ArchiveWalker:
    """Yields a file and, recursively, every member of the archives in it, within `limits`.

    Each member's file exists until the consumer asks for the next one; everything is written
    under `scratch` with generated names (a member's own name never becomes a path).
    """

    limits: ArchiveLimits
    scratch: Path
    refusals: list[str] = field(default_factory=list)
    members: int = 0
    unpacked_bytes: int = 0
    largest_member: int = 0
    _serial: int = 0

    def walk(self, path: Path, name: str) -> Iterator[Member]:
        try:
            yield from self._walk(Member(name, path, 0))
        except LimitExceeded as refusal:
            self.refusals.append(str(refusal))

    def _walk(self, member: Member) -> Iterator[Member]:
        yield member
        kind = kind_of(member.path)
        if kind is None:
            return
        if member.depth >= self.limits.max_depth:
            self.refusals.append(
                f"{member.name}: a {kind} archive nested more than {self.limits.max_depth} "
                "levels deep; refused, not unpacked"
            )
            return
        for inner in self._members(member, kind):
            try:
                yield from self._walk(inner)
            finally:
                inner.path.unlink(missing_ok=True)

    def _members(self, archive: Member, kind: ArchiveKind) -> Iterator[Member]:
        opener = {"zip": self._zip, "tar": self._tar, "gzip": self._gzip}[kind]
        try:
            yield from opener(archive)
        except _UNREADABLE as error:
            self.refusals.append(
                f"{archive.name}: a {kind} archive that cannot be opened ({error}); "
                "what it holds is not scanned"
            )

    def _zip(self, archive: Member) -> Iterator[Member]:
        with zipfile.ZipFile(archive.path) as zipped:
            for info in zipped.infolist():
                if info.is_dir():
                    continue
                label = f"{archive.name}!{info.filename}"
                self._count(label)
                if info.header_offset < 0:
                    # A central directory whose offsets point before the file's start: zipfile
                    # would seek there and raise OSError (EINVAL), which is not caught as
                    # "unreadable" (a full disk must not pass): the corrupt upload was retried
                    # as transient until its retries ran out. Refused, not retried.
                    self.refusals.append(
                        f"{label}: its header lies before the archive's start; not scanned"
                    )
                    continue
                if info.flag_bits & 0x1:
                    self.refusals.append(f"{label}: encrypted, cannot be scanned; refused")
                    continue
                declared = self._declared_refusal(label, info.file_size, info.compress_size)
                if declared:
                    self.refusals.append(declared)
                    continue
                with zipped.open(info) as source:
                    # Scan what a member holds even if its CRC is wrong: tolerant unzippers
                    # extract such members, so a bad CRC must not hide them from the scan.
                    source._expected_crc = None  # type: ignore[attr-defined]
                    unpacked = self._unpack(source, label, archive.depth + 1, info.compress_size)
                if unpacked is not None:
                    yield unpacked

    def _tar(self, archive: Member) -> Iterator[Member]:
        with tarfile.open(archive.path, mode="r:") as tar:
            for info in tar:
                if not info.isreg():  # links, devices, directories: no bytes of their own
                    continue
                label = f"{archive.name}!{info.name}"
                self._count(label)
                declared = self._declared_refusal(label, info.size, None)
                if declared:
                    self.refusals.append(declared)
                    continue
                source = tar.extractfile(info)
                if source is None:
                    continue
                with source:
                    unpacked = self._unpack(source, label, archive.depth + 1, None)
                if unpacked is not None:
                    yield unpacked

    def _gzip(self, archive: Member) -> Iterator[Member]:
        inner = archive.name.rsplit("!", 1)[-1]
        stem = inner[: -len(".gz")] if inner.lower().endswith(".gz") else f"{inner}.ungz"
        label = f"{archive.name}!{stem}"
        self._count(label)
        compressed = archive.path.stat().st_size
        with gzip.open(archive.path, "rb") as source:
            unpacked = self._unpack(source, label, archive.depth + 1, compressed)
        if unpacked is not None:
            yield unpacked

    def _count(self, label: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise LimitExceeded(
                f"{label}: more than {self.limits.max_members} archive members in all; "
                "refused, the rest is not unpacked"
            )

    def _declared_refusal(self, label: str, size: int, compressed: int | None) -> str | None:
        """A refusal from the sizes the archive declares, before reading a byte of the member."""
        if self.unpacked_bytes + size > self.limits.max_total_bytes:
            return (
                f"{label}: declares {size} bytes, past the {self.limits.max_total_bytes} bytes "
                "an upload may unpack to; refused, not unpacked"
            )
        if compressed is not None and self._past_ratio(size, compressed):
            return self._bomb(label, compressed)
        return None

    def _unpack(
        self, source: _Readable, label: str, depth: int, compressed: int | None
    ) -> Member | None:
        """Streams one member to scratch, counting; None (and a refusal) past a limit.

        A member whose stream breaks halfway (truncated or corrupt data) keeps what was read,
        which is still scanned; the rest is refused.
        """
        self._serial += 1
        path = self.scratch / f"member-{self._serial:06d}"
        written = 0
        try:
            with path.open("wb") as out:
                for piece in iter(lambda: source.read(CHUNK), b""):
                    written += len(piece)
                    self.unpacked_bytes += len(piece)
                    self.largest_member = max(self.largest_member, written)
                    if compressed is not None and self._past_ratio(written, compressed):
                        path.unlink(missing_ok=True)
                        self.refusals.append(self._bomb(label, compressed))
                        return None
                    if self.unpacked_bytes > self.limits.max_total_bytes:
                        path.unlink(missing_ok=True)
                        raise LimitExceeded(
                            f"{label}: unpacking went past the {self.limits.max_total_bytes} "
                            "bytes an upload may unpack to; refused, the rest is not unpacked"
                        )
                    out.write(piece)
        except _UNREADABLE as error:
            self.refusals.append(
                f"{label}: unreadable after {written} bytes ({error}); the rest is not scanned"
            )
        return Member(label, path, depth)

    def _past_ratio(self, size: int, compressed: int) -> bool:
        return size > self.limits.ratio_floor and size > max(compressed, 1) * self.limits.max_ratio

    def _bomb(self, label: str, compressed: int) -> str:
        return (
            f"{label}: expands to more than {self.limits.max_ratio} times its {compressed} "
            "compressed bytes (a likely zip bomb); refused, not unpacked"
        )
