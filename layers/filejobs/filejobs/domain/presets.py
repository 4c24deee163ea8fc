"""Upload presets: what runs on a tenant's uploads, said by the tenant instead of by the code.

"Only a scan and a 512 px WebP thumbnail for uploads/acme/avatars/", "PDF previews for
uploads/acme/contracts/", "store, do nothing for uploads/acme/archive/". A preset names its jobs
(each job type once, with that type's options and a priority within the tenant's allowance) and
where it applies:

- an upload that names it in its object metadata (`x-amz-meta-filejobs-preset: avatars`);
- else the preset bound to the longest key prefix the upload is under;
- else the tenant's default preset;
- else no preset: the default table (domain/content.py `job_types_for`).

Of a preset's jobs, an upload gets those that fit its content type (domain/content.py `fits`: no
thumbnailer is handed a PDF), so one preset serves a folder of mixed files.

Presets are versioned: a change is a new version and applies to the uploads after it; a file
records the name and version it was given, and its jobs carry that version's options.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from filejobs.domain.content import AUDIO_WITH_ART, fits, job_types_for, media_type
from filejobs.domain.job import PRIORITY_MAX, PRIORITY_MIN, JobType
from filejobs.domain.job_options import options_of
from filejobs.domain.tenant_prefixes import FieldError, prefix_problem

MAX_PRESETS_PER_TENANT = 50
MAX_PREFIXES_PER_PRESET = 20
MAX_DESCRIPTION_CHARS = 300
# Preset names travel in object metadata and URLs: lower-case letters, digits, '-' and '_'.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_NAME = re.compile(NAME_PATTERN)
# The object metadata an upload names a preset with (S3 lower-cases metadata keys).
METADATA_KEY = "filejobs-preset"
# A job that decodes the file may run only after a clean scan (services/scan_gate.py), so a
# preset that has one must scan.
_PARSING_JOBS = frozenset(
    {
        JobType.THUMBNAIL_GENERATION,
        JobType.VIDEO_THUMBNAIL,
        JobType.DOCUMENT_PREVIEW,
        JobType.COMPRESSION,
    }
)


class PresetError(FieldError):
    """A preset that cannot be accepted: `field` names what is wrong, the message why."""


@dataclass(frozen=True)
class PresetJob:
    job_type: JobType
    options: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_type": self.job_type.value,
            "options": dict(self.options),
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Preset:
    """One version of a tenant's preset."""

    tenant: str
    name: str
    version: int
    jobs: tuple[PresetJob, ...]  # empty: store the file, run nothing
    prefixes: tuple[str, ...] = ()
    tenant_default: bool = False
    description: str = ""
    updated_at: datetime | None = None
    updated_by: str = ""

    @property
    def job_types(self) -> tuple[JobType, ...]:
        return tuple(job.job_type for job in self.jobs)

    def jobs_for(self, content_type: str, *, cover_art: bool = False) -> tuple[PresetJob, ...]:
        """The preset's jobs an upload of this (sniffed) content type gets: those that fit it
        (audio's thumbnail only where the sniffer found cover art), in the order of the job
        types (the default table's order)."""
        fitting = {
            job.job_type: job
            for job in self.jobs
            if fits(job.job_type, content_type)
            and not _audio_without_art(job.job_type, content_type, cover_art)
        }
        return tuple(fitting[job_type] for job_type in JobType if job_type in fitting)


@dataclass(frozen=True)
class AppliedPreset:
    """What ingest records on a file: which preset (and version) chose its jobs."""

    name: str
    version: int
    # How the upload came to it: "metadata", "prefix" or "tenant".
    by: str


@dataclass(frozen=True)
class PlannedJob:
    job_type: JobType
    options: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 0


@dataclass(frozen=True)
class UploadPlan:
    """The jobs an upload gets, and the preset that chose them (None: the default table)."""

    jobs: tuple[PlannedJob, ...]
    preset: AppliedPreset | None = None
    # Why a preset the upload named was not used (unknown name); None when nothing was amiss.
    note: str | None = None


def default_plan(content_type: str, *, cover_art: bool = False) -> UploadPlan:
    return UploadPlan(
        tuple(PlannedJob(job) for job in job_types_for(content_type, cover_art=cover_art))
    )


@dataclass(frozen=True)
class TenantPresets:
    """A tenant's current presets, as ingest resolves uploads against them."""

    presets: tuple[Preset, ...] = ()

    def named(self, name: str) -> Preset | None:
        return next((preset for preset in self.presets if preset.name == name), None)

    def plan(
        self, key: str, content_type: str, *, requested: str | None = None, cover_art: bool = False
    ) -> UploadPlan:
        """The jobs an upload of `key` gets: the preset it names, else the longest prefix's,
        else the tenant's default, else the default table."""
        note = None
        if requested:
            named = self.named(requested.strip().lower())
            if named is not None:
                return _plan_of(named, "metadata", content_type, cover_art)
            note = (
                f"the upload names preset {requested[:63]!r} (x-amz-meta-{METADATA_KEY}), "
                "which the tenant does not have"
            )
        chosen = self._by_prefix(key)
        if chosen is not None:
            return _with_note(_plan_of(chosen, "prefix", content_type, cover_art), note)
        default = next((preset for preset in self.presets if preset.tenant_default), None)
        if default is not None:
            return _with_note(_plan_of(default, "tenant", content_type, cover_art), note)
        return _with_note(default_plan(content_type, cover_art=cover_art), note)

    def _by_prefix(self, key: str) -> Preset | None:
        bound = [
            (len(prefix), preset)
            for preset in self.presets
            for prefix in preset.prefixes
            if key.startswith(prefix)
        ]
        return max(bound, key=lambda pair: pair[0])[1] if bound else None


def _audio_without_art(job_type: JobType, content_type: str, cover_art: bool) -> bool:
    artless = media_type(content_type) in AUDIO_WITH_ART and not cover_art
    return artless and job_type is JobType.THUMBNAIL_GENERATION


def _plan_of(preset: Preset, by: str, content_type: str, cover_art: bool) -> UploadPlan:
    jobs = tuple(
        PlannedJob(job.job_type, job.options, job.priority)
        for job in preset.jobs_for(content_type, cover_art=cover_art)
    )
    return UploadPlan(jobs, AppliedPreset(preset.name, preset.version, by))


def _with_note(plan: UploadPlan, note: str | None) -> UploadPlan:
    return plan if note is None else UploadPlan(plan.jobs, plan.preset, note)


# --- checks -------------------------------------------------------------------------------------


def checked_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise PresetError(
            "name", "1 to 63 lower-case letters, digits, '-' or '_', starting with a letter/digit"
        )
    return name


def check_jobs(jobs: tuple[PresetJob, ...]) -> None:
    """Each job type at most once, with options its processor takes (the definition the API
    checks a requested job's with), and a preset that parses files scans them."""
    seen: set[JobType] = set()
    for index, job in enumerate(jobs):
        # Its error names the field: jobs[0].options.sizes[1]: ...
        options_of(job.job_type).check(job.options, root=f"jobs[{index}].options")
        if job.job_type in seen:
            raise PresetError(f"jobs[{index}].job_type", f"{job.job_type.value} is listed twice")
        seen.add(job.job_type)
        # The API's range for one job: the order of the tenant's own jobs within its share.
        if not PRIORITY_MIN <= job.priority <= PRIORITY_MAX:
            raise PresetError(
                f"jobs[{index}].priority",
                f"must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}",
            )
    parsing = sorted(job.value for job in seen & _PARSING_JOBS)
    if parsing and JobType.VIRUS_SCAN not in seen:
        raise PresetError(
            "jobs",
            f"{', '.join(parsing)} parse the file, which only a clean virus_scan allows: "
            "add virus_scan",
        )


def check_prefixes(tenant: str, prefixes: Iterable[str]) -> None:
    listed = list(prefixes)
    if len(listed) > MAX_PREFIXES_PER_PRESET:
        raise PresetError("prefixes", f"at most {MAX_PREFIXES_PER_PRESET}")
    for index, prefix in enumerate(listed):
        if problem := prefix_problem(tenant, prefix):
            raise PresetError(f"prefixes[{index}]", problem)


def check_bindings(preset: Preset, others: Iterable[Preset]) -> None:
    """A prefix is bound to one preset, and a tenant has one default."""
    for other in others:
        if other.name == preset.name:
            continue
        shared = sorted(set(preset.prefixes) & set(other.prefixes))
        if shared:
            raise PresetError("prefixes", f"{shared[0]!r} is bound to preset {other.name!r}")
        if preset.tenant_default and other.tenant_default:
            raise PresetError(
                "tenant_default", f"preset {other.name!r} is the tenant's default already"
            )


@dataclass(frozen=True)
class PresetSet:
    """A tenant's presets as stored: one record, changed as a whole by one conditional write on
    its revision, so two changes racing can never both bind a prefix."""

    presets: tuple[Preset, ...] = ()
    revision: int = 0  # 0: the tenant has never had presets

    def tenant_presets(self) -> TenantPresets:
        return TenantPresets(self.presets)


def preset_to_dict(preset: Preset) -> dict[str, Any]:
    return {
        "tenant": preset.tenant,
        "name": preset.name,
        "version": preset.version,
        "jobs": [job.to_dict() for job in preset.jobs],
        "prefixes": list(preset.prefixes),
        "tenant_default": preset.tenant_default,
        "description": preset.description,
        "updated_at": None if preset.updated_at is None else preset.updated_at.isoformat(),
        "updated_by": preset.updated_by,
    }


def preset_from_dict(data: Mapping[str, Any]) -> Preset:
    updated_at = data.get("updated_at")
    return Preset(
        tenant=data["tenant"],
        name=data["name"],
        version=int(data["version"]),
        jobs=tuple(
            PresetJob(JobType(job["job_type"]), dict(job.get("options") or {}), job["priority"])
            for job in data["jobs"]
        ),
        prefixes=tuple(data.get("prefixes") or ()),
        tenant_default=bool(data.get("tenant_default")),
        description=data.get("description") or "",
        updated_at=None if updated_at is None else datetime.fromisoformat(updated_at),
        updated_by=data.get("updated_by") or "",
    )
