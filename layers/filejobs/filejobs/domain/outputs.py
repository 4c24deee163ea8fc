"""A job's derived files, typed: what an app needs to render a gallery, a page strip, a video
scrubber and a placeholder from one answer.

A processor names each file it wrote in its result as an object with `key` and, since the
preview bundle, `kind`, `format`, `bytes`, its dimensions and a page number or a time range
(the convention in processors/base.py). `derived_files` finds them at any depth of the result,
keeps only keys under the job's own folder (a result naming anything else, the source object or
another tenant's files, is never turned into a URL), and types each one. Results written before
the bundle carry no `kind`: the field that holds the file tells it (`thumbnails`, `preview`,
`poster`), or the job type (compression's result is its one file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from filejobs.domain.job import JobStatus, ProcessingJob
from filejobs.domain.job_values import JobType
from filejobs.domain.keys import DERIVED_PREFIX


class OutputKind(StrEnum):
    """What a derived file is for."""

    THUMBNAIL = "thumbnail"  # an image at a requested long edge
    PREVIEW = "preview"  # a document's first page
    PAGE = "page"  # one page of a document, numbered from 1
    POSTER = "poster"  # a video's representative frame
    STORYBOARD = "storyboard"  # a sprite of a video's frames in a grid
    STORYBOARD_INDEX = "storyboard_index"  # WebVTT: time ranges to the sprite's tiles
    ANIMATION = "animation"  # a short moving preview of a video
    WAVEFORM = "waveform"  # an audio file's amplitude drawn over its duration
    COVER = "cover"  # the art embedded in an audio file
    COMPRESSED = "compressed"  # the upload itself, compressed
    FILE = "file"  # anything else a result names


# Results written before the bundle: the field holding a file says what it is.
_KIND_OF_FIELD: Final = {
    "thumbnails": OutputKind.THUMBNAIL,
    "preview": OutputKind.PREVIEW,
    "pages": OutputKind.PAGE,
    "poster": OutputKind.POSTER,
    "storyboard": OutputKind.STORYBOARD,
    "storyboard_index": OutputKind.STORYBOARD_INDEX,
    "animation": OutputKind.ANIMATION,
    "waveform": OutputKind.WAVEFORM,
    "cover": OutputKind.COVER,
}
_KIND_OF_JOB: Final = {JobType.COMPRESSION: OutputKind.COMPRESSED}
_FORMAT: Final = re.compile(r"[a-z0-9]{1,12}")

# A completion (kept on the file item, sent in File Processed) lists at most this many of one
# job's files: a document's 20 pages and its preview fit; the rest are counted.
OUTPUTS_SUMMARISED: Final = 24


@dataclass(frozen=True)
class DerivedFile:
    """One file a job wrote, with what an app needs to place it without opening it."""

    key: str
    kind: OutputKind
    format: str | None = None  # the file's extension: webp, jpeg, png, avif, vtt, mp4, ...
    bytes: int | None = None
    width: int | None = None
    height: int | None = None
    page: int | None = None
    start_seconds: float | None = None
    end_seconds: float | None = None

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def facts(self) -> dict[str, Any]:
        """Every typed field but the key, null where the file does not have it: one shape for
        every kind, so a client reads `page` or `start_seconds` without asking which."""
        return {
            "kind": self.kind.value,
            "format": self.format,
            "bytes": self.bytes,
            "width": self.width,
            "height": self.height,
            "page": self.page,
            "start_seconds": self.start_seconds,
            "end_seconds": self.end_seconds,
        }


def job_folder(job: ProcessingJob) -> str:
    """Where the job writes: `derived/{tenant}/{file_id}/{job_type}/`."""
    return f"{DERIVED_PREFIX}/{job.tenant}/{job.file_id}/{job.job_type.value}/"


def derived_files(job: ProcessingJob) -> list[DerivedFile]:
    """The files a completed job's result names under its own folder, in order, once each."""
    if job.status is not JobStatus.COMPLETED or not job.result_data:
        return []
    folder = job_folder(job)
    found: dict[str, DerivedFile] = {}

    def walk(value: object, field: str) -> None:
        if isinstance(value, dict):
            key = value.get("key")
            if isinstance(key, str) and _inside(key, folder):
                named = typed_file(key, value, _kind(value, field, job.job_type))
                if key not in found or _more_specific(named, found[key]):
                    found[key] = named  # in the place of its first mention
            for name, item in value.items():
                if name != "key":
                    walk(item, name)
        elif isinstance(value, list):
            for item in value:
                walk(item, field)

    walk(job.result_data, "")
    return list(found.values())


def typed_file(key: str, fields: dict[str, Any], kind: OutputKind) -> DerivedFile:
    """The file `key` with the facts its result object states, each only if of its type (a
    result is the processor's word, and a processor's bug must not become the API's answer)."""
    return DerivedFile(
        key=key,
        kind=kind,
        format=_format(fields.get("format"), key),
        bytes=_count(fields.get("bytes")),
        width=_count(fields.get("width")),
        height=_count(fields.get("height")),
        page=_count(fields.get("page")),
        start_seconds=_seconds(fields.get("start_seconds")),
        end_seconds=_seconds(fields.get("end_seconds")),
    )


def _more_specific(named: DerivedFile, first: DerivedFile) -> bool:
    """A file the result names twice is typed by the mention that places it: a document's first
    page is its `preview` and page 1 of its `pages`, a page first of all."""
    placed = named.page is not None or named.start_seconds is not None
    return placed and first.page is None and first.start_seconds is None


def _inside(key: str, folder: str) -> bool:
    return key.startswith(folder) and len(key) > len(folder) and ".." not in key


def _kind(fields: dict[str, Any], field: str, job_type: JobType) -> OutputKind:
    stated = fields.get("kind")
    if isinstance(stated, str) and stated in OutputKind.__members__.values():
        return OutputKind(stated)
    return _KIND_OF_FIELD.get(field) or _KIND_OF_JOB.get(job_type, OutputKind.FILE)


def _format(stated: object, key: str) -> str | None:
    """The stated format, else the key's extension; lower case, or None when neither is one."""
    for candidate in (stated, key.rsplit("/", 1)[-1].rpartition(".")[2]):
        if isinstance(candidate, str) and _FORMAT.fullmatch(candidate.lower()):
            return candidate.lower()
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return None
    return float(value)
