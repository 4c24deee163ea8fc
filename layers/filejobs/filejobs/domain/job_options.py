"""The options each job type takes, one definition per type: names, types, bounds, choices,
defaults and descriptions, as plain data.

The same definition is read twice, so the two can never drift apart:

- by the API when a job is requested (`OptionSet.check`): an unknown name, a value of the wrong
  type or out of bounds is refused then (422, naming the field and the reason), and no job is
  made;
- by the job type's processor when it runs (`OptionSet.read`), which fills in the defaults. A
  job stored before its options were checked (or whose options a later release narrowed) is
  read by the same rules: it fails at once with the same readable reason, never a crash.

tools/openapi.py writes each set into the OpenAPI document (`OptionSet.schema`), and the
"Job options" section of docs/JOBS.md describes them.

A job's stored `input_data` also carries what the system puts there (the object's location,
domain/ingest.py, and a rescan's request, services/rescans.py): `read` looks only at the
option names, `check` refuses every other name (a caller never sets those).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from filejobs.domain.job_values import JobType


class OptionError(ValueError):
    """An option the definition refuses: `field` is its path (`input_data.sizes[2]`)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


ROOT = "input_data"


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else _json_text(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _json_text(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}" if value else "an empty list"
    return str(value)


def _integer(value: object) -> int | None:
    """JSON's one number type: 5 and 5.0 are the integer 5 (JSON Schema's "integer" says so);
    5.5, "5" and true are not integers. DynamoDB gives numbers back as Decimal."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)  # a stored job's number, as DynamoDB gives it back
    return None


@dataclass(frozen=True)
class Option:
    """One option: its name and description; subclasses say its type and bounds."""

    name: str
    description: str

    def read(self, value: object, path: str, chosen: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def default(self, chosen: Mapping[str, Any]) -> Any:
        """The value when the job names none (None: the processor's deployment setting)."""
        return None

    def schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def conditions(self) -> list[dict[str, Any]]:
        """JSON Schema branches (anyOf) that tie this option to another; none by default."""
        return []


@dataclass(frozen=True)
class Choice(Option):
    choices: tuple[str, ...] = ()
    fallback: str | None = None

    def read(self, value: object, path: str, chosen: Mapping[str, Any]) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise OptionError(
                path, f"must be one of {', '.join(self.choices)}; got {_shown(value)}"
            )
        return value

    def default(self, chosen: Mapping[str, Any]) -> Any:
        return self.fallback

    def schema(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "type": "string",
            "enum": list(self.choices),
            "description": self.description,
        }
        if self.fallback is not None:
            found["default"] = self.fallback
        return found


@dataclass(frozen=True)
class IntegerList(Option):
    """A list of integers within bounds; given in any order, each value once or more, read
    largest first, each once."""

    minimum: int = 0
    maximum: int = 0
    max_items: int = 1
    unit: str = ""

    def read(self, value: object, path: str, chosen: Mapping[str, Any]) -> tuple[int, ...]:
        if not isinstance(value, list | tuple) or not value:
            raise OptionError(
                path,
                f"must be a list of 1 to {self.max_items} integers from {self.minimum} to "
                f"{self.maximum}; got {_shown(value)}",
            )
        if len(value) > self.max_items:
            raise OptionError(path, f"must hold at most {self.max_items} values; got {len(value)}")
        numbers = []
        for index, item in enumerate(value):
            number = _integer(item)
            if number is None or not self.minimum <= number <= self.maximum:
                raise OptionError(
                    f"{path}[{index}]",
                    f"must be an integer from {self.minimum} to {self.maximum}"
                    f"{' ' + self.unit if self.unit else ''}; got {_shown(item)}",
                )
            numbers.append(number)
        return tuple(sorted(set(numbers), reverse=True))

    def schema(self) -> dict[str, Any]:
        return {
            "type": "array",
            "minItems": 1,
            "maxItems": self.max_items,
            "items": {"type": "integer", "minimum": self.minimum, "maximum": self.maximum},
            "description": self.description,
        }


@dataclass(frozen=True)
class Integer(Option):
    """One integer within bounds, with a default."""

    minimum: int = 0
    maximum: int = 0
    fallback: int = 0

    def read(self, value: object, path: str, chosen: Mapping[str, Any]) -> int:
        number = _integer(value)
        if number is None or not self.minimum <= number <= self.maximum:
            raise OptionError(
                path,
                f"must be an integer from {self.minimum} to {self.maximum}; got {_shown(value)}",
            )
        return number

    def default(self, chosen: Mapping[str, Any]) -> Any:
        return self.fallback

    def schema(self) -> dict[str, Any]:
        return {
            "type": "integer",
            "minimum": self.minimum,
            "maximum": self.maximum,
            "default": self.fallback,
            "description": self.description,
        }


@dataclass(frozen=True)
class Boolean(Option):
    """JSON's true or false, with a default: 1, "true" and null are not booleans (a client that
    sends them meant something this option cannot guess)."""

    fallback: bool = False

    def read(self, value: object, path: str, chosen: Mapping[str, Any]) -> bool:
        if not isinstance(value, bool):
            raise OptionError(path, f"must be true or false; got {_shown(value)}")
        return value

    def default(self, chosen: Mapping[str, Any]) -> Any:
        return self.fallback

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean", "default": self.fallback, "description": self.description}


@dataclass(frozen=True)
class Range:
    minimum: int
    maximum: int
    default: int


@dataclass(frozen=True)
class DependentInteger(Option):
    """An integer whose bounds and default depend on another option's choice (read before it):
    a compression level is a zstd level or a gzip level."""

    on: str = ""
    on_default: str = ""  # the choice of `on` when the job names none
    ranges: Mapping[str, Range] = field(default_factory=dict)

    def _range(self, chosen: Mapping[str, Any]) -> tuple[str, Range]:
        choice = str(chosen[self.on])
        return choice, self.ranges[choice]

    def read(self, value: object, path: str, chosen: Mapping[str, Any]) -> int:
        choice, bounds = self._range(chosen)
        number = _integer(value)
        if number is None or not bounds.minimum <= number <= bounds.maximum:
            raise OptionError(
                path,
                f"must be an integer from {bounds.minimum} to {bounds.maximum} for "
                f"{self.on} {choice}; got {_shown(value)}",
            )
        return number

    def default(self, chosen: Mapping[str, Any]) -> Any:
        return self._range(chosen)[1].default

    def schema(self) -> dict[str, Any]:
        return {
            "type": "integer",
            "minimum": min(r.minimum for r in self.ranges.values()),
            "maximum": max(r.maximum for r in self.ranges.values()),
            "description": self.description,
        }

    def conditions(self) -> list[dict[str, Any]]:
        branches = []
        for choice, bounds in self.ranges.items():
            branch: dict[str, Any] = {
                "properties": {
                    self.on: {"const": choice},
                    self.name: {"minimum": bounds.minimum, "maximum": bounds.maximum},
                }
            }
            if choice != self.on_default:
                branch["required"] = [self.on]
            branches.append(branch)
        return branches


@dataclass(frozen=True)
class OptionSet:
    """The options of one job type, read in order (an option may depend on one before it)."""

    job_type: JobType
    description: str
    options: tuple[Option, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(option.name for option in self.options)

    def check(self, given: Mapping[str, Any], root: str = ROOT) -> dict[str, Any]:
        """A request's options, as given (no defaults added: a default may be the deployment's,
        decided when the job runs), each value checked; unknown names refused."""
        unknown = sorted(set(given) - set(self.names))
        if unknown:
            takes = f"takes {', '.join(self.names)}" if self.names else "takes no options"
            raise OptionError(
                f"{root}.{unknown[0][:40]}",
                f"unknown option: a {self.job_type.value} job {takes}",
            )
        self._read(given, root)
        return dict(given)

    def read(self, input_data: Mapping[str, Any] | None, root: str = ROOT) -> dict[str, Any]:
        """The job's options as its processor runs them: each given one checked, each other
        its default (None where the deployment decides). Names that are not options (the
        object's location, a rescan's request) are not looked at."""
        data = input_data or {}
        return self._read({name: data[name] for name in self.names if name in data}, root)

    def _read(self, given: Mapping[str, Any], root: str) -> dict[str, Any]:
        chosen: dict[str, Any] = {}
        for option in self.options:
            if option.name in given:
                chosen[option.name] = option.read(
                    given[option.name], f"{root}.{option.name}", chosen
                )
            else:
                chosen[option.name] = option.default(chosen)
        return chosen

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the options object (OpenAPI 3.1)."""
        found: dict[str, Any] = {
            "type": "object",
            "additionalProperties": False,
            "description": self.description,
            "properties": {option.name: option.schema() for option in self.options},
        }
        ties = [{"anyOf": b} for option in self.options if (b := option.conditions())]
        if len(ties) == 1:
            found.update(ties[0])
        elif ties:
            found["allOf"] = ties
        return found


# --- the definitions -----------------------------------------------------------------------

THUMBNAIL_MIN_SIZE: Final = 16
THUMBNAIL_MAX_SIZE: Final = 4096
THUMBNAIL_MAX_SIZES: Final = 8
THUMBNAIL_FORMATS: Final = ("webp", "jpeg", "avif")
THUMBNAIL_SIZES = IntegerList(
    "sizes",
    "Long edges of the thumbnails, in pixels; one thumbnail each (duplicates are made once). "
    "Default: the deployment's ThumbnailSizes parameter (128,256,512 unless changed). An image "
    "smaller than a size is not enlarged.",
    minimum=THUMBNAIL_MIN_SIZE,
    maximum=THUMBNAIL_MAX_SIZE,
    max_items=THUMBNAIL_MAX_SIZES,
    unit="pixels",
)
THUMBNAIL_FORMAT = Choice(
    "format",
    "Encoding of the thumbnails: webp (quality 80), jpeg (quality 85, on white where the image "
    "is transparent) or avif (quality 50, transparency kept: about 30% smaller than webp at "
    "the same fidelity, 2 to 4 times slower to encode).",
    choices=THUMBNAIL_FORMATS,
    fallback="webp",
)
THUMBNAIL_KEEP_METADATA = Boolean(
    "keep_metadata",
    "Whether the thumbnails keep the image's EXIF (camera, lens, capture time, exposure), "
    "without its GPS position, camera and lens serial numbers, owner name and maker notes, "
    "with its orientation set to 1 (the pixels are already upright). XMP, IPTC and the ICC "
    "profile are never kept. Default false: the thumbnails carry no metadata.",
    fallback=False,
)
THUMBNAIL_SIMILAR_IMAGES = Boolean(
    "similar_images",
    "Also look for the tenant's images that look nearly the same (a resized or re-encoded "
    "copy): their ids and how many of the 64 bits of the perceptual hash differ, at most 7, in "
    "the result's similar_images. Costs one BatchGetItem and five writes to the files table "
    "per image.",
    fallback=False,
)
DOCUMENT_PREVIEW_MAX_PAGES: Final = 20
DOCUMENT_PREVIEW_PAGES = Integer(
    "pages",
    "How many pages to render, from the first: one WebP image of each, 1024 px on its long edge "
    f"(1 to {DOCUMENT_PREVIEW_MAX_PAGES}, default 3). A document with fewer pages has them all "
    "rendered; a text, Markdown, CSV or JSON file has one typeset page.",
    minimum=1,
    maximum=DOCUMENT_PREVIEW_MAX_PAGES,
    fallback=3,
)
COMPRESSION_LEVELS: Final[Mapping[str, Range]] = {
    # zstd stops at 19: the "ultra" levels (20-22) use windows of up to 128 MiB.
    "zstd": Range(1, 19, 3),
    "gzip": Range(1, 9, 6),
}

VIDEO_STORYBOARD = Boolean(
    "storyboard",
    "A video's storyboard: a JPEG sprite of tiles (one a second, or a hundredth of a longer "
    "video) and a WebVTT index of them. Decodes the video through (a 60 s 1080p clip: about "
    "3 s more than the poster alone); false for the poster alone. Audio: no effect.",
    fallback=True,
)
VIDEO_ANIMATION = Boolean(
    "animation",
    "A video's 3-second animated WebP preview, from the poster's time. Audio: no effect.",
    fallback=True,
)

OPTIONS: Final[Mapping[JobType, OptionSet]] = {
    JobType.THUMBNAIL_GENERATION: OptionSet(
        JobType.THUMBNAIL_GENERATION,
        "Options of a thumbnail_generation job",
        (
            THUMBNAIL_SIZES,
            THUMBNAIL_FORMAT,
            THUMBNAIL_KEEP_METADATA,
            THUMBNAIL_SIMILAR_IMAGES,
        ),
    ),
    JobType.COMPRESSION: OptionSet(
        JobType.COMPRESSION,
        "Options of a compression job",
        (
            Choice(
                "algorithm",
                "The compressor: zstd (compressed.zst) or gzip (compressed.gz).",
                choices=tuple(COMPRESSION_LEVELS),
                fallback="zstd",
            ),
            DependentInteger(
                "level",
                "Compression level: zstd 1 to 19 (default 3), gzip 1 to 9 (default 6).",
                on="algorithm",
                on_default="zstd",
                ranges=COMPRESSION_LEVELS,
            ),
        ),
    ),
    JobType.VIDEO_THUMBNAIL: OptionSet(
        JobType.VIDEO_THUMBNAIL,
        "Options of a video_thumbnail job",
        (VIDEO_STORYBOARD, VIDEO_ANIMATION),
    ),
    JobType.DOCUMENT_PREVIEW: OptionSet(
        JobType.DOCUMENT_PREVIEW, "Options of a document_preview job", (DOCUMENT_PREVIEW_PAGES,)
    ),
    **{
        job_type: OptionSet(job_type, f"A {job_type.value} job takes no options")
        for job_type in (
            JobType.VIRUS_SCAN,
            JobType.DEDUPLICATION_CHECK,
        )
    },
}


def options_of(job_type: JobType) -> OptionSet:
    return OPTIONS[job_type]
