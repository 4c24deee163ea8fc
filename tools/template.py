"""Writes template.yaml from the job-type table: plain YAML, one copy of each job type's resources.

    .venv/bin/python tools/template.py           # rewrites template.yaml
    .venv/bin/python tools/template.py --check   # exits 1 when template.yaml differs

Its sources, in infra/template/:

- `job_types.yaml`: one row per job type (memory, timeout, storage, layers, grants, gated or not).
- `skeleton.yaml`: template.yaml with the job types left out. Two directives stand for them:
  `#@each-part NAME.yaml` writes parts/NAME.yaml once per row, where it stands; a line
  `#@each TEXT` writes TEXT once per row (consecutive `#@each` lines repeat as one group), at the
  directive's indentation. `#@each[gated]` and `#@each[ungated]` take only those rows;
  `#@each[sorted]` writes its lines into the list item lines around it and sorts that list.
  A line starting `#@#` is a note for the skeleton's reader, left out of template.yaml.
- `parts/`: a job type's resources (queues, worker with its log group and role, alarm) with
  placeholders, `{{Name}}` (PascalCase), `{{type}}`, `{{TYPE}}` and `{{kebab}}`, and slots (a
  placeholder alone on its line: zero or more lines from the row, at the slot's indentation).

No `Fn::ForEach`: checkov, cfn-lint, SAM and the local stack read the output as written
(docs/ADDING_A_JOB_TYPE.md says why). tests/unit/test_template_generation.py fails when
template.yaml differs from what this writes.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from filejobs_dev.generated_files import write_or_check

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
SOURCES = ROOT / "infra" / "template"

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_SLOT = re.compile(r"^(\s*)\{\{(\w+)\}\}$")
_EACH = re.compile(r"^(\s*)#@each(?:\[(\w+)\])? (.*)$")
_EACH_PART = re.compile(r"^\s*#@each-part (\S+)$")

# A gated type parses untrusted bytes: what its role may read of the files table and the uploads.
_DECODER_FILES_TABLE_GRANT = """\
- Sid: FilesTableRead
  Effect: Allow
  # The scan gate reads the file's verdict; a decoder's worker never writes a file
  # item (its process parses untrusted bytes: a verdict must be out of its reach).
  Action: dynamodb:GetItem
  Resource: !GetAtt FilesTable.Arn"""
_GATED_READ_UPLOADS_NOTE = """\
# Only a version the scan tagged as one this stack parses (the gate's rule, again
# where S3 decides: UNSCANNABLE too when UnscannableFiles is "process")."""
_GATED_READ_UPLOADS_CONDITION = (
    "Condition:\n"
    "  StringEquals:\n"
    "    s3:ExistingObjectTag/scan-status:"
    " !If [ProcessesUnscannableFiles, [CLEAN, UNSCANNABLE], [CLEAN]]"
)

_LAYERS_NOTE = "# After FileJobsLayer (Globals): the media libraries this worker imports."

# The first worker says why a batch holds one job; the others point to it.
_ONE_JOB_A_BATCH_WHY = """\
# One job per invocation, as on the high lane: a job never waits inside an
# invocation for the jobs handed over with it (a batch of 5 videos runs 5 in a
# row), and the fair queue picks every job (a batch would take 5 of a noisy
# tenant's at once). The cost: an invocation and about 2 SQS requests per job.
BatchSize: 1"""


@dataclass(frozen=True)
class JobTypeRow:
    """A row of infra/template/job_types.yaml (its header describes each field)."""

    type: str
    gated: bool
    memory: int
    timeout: int
    layers: tuple[str, ...] = ()
    memory_note: str = ""
    ephemeral_storage: int | None = None
    ephemeral_storage_note: str = ""
    environment: str = ""
    depends_on: str = ""
    depends_on_note: str = ""
    writes_scan_verdict: bool = False
    files_table_grant: str = ""
    grants: str = ""
    resources_after_worker: str = ""

    @property
    def name(self) -> str:
        return "".join(word.capitalize() for word in self.type.split("_"))


def load_rows(path: Path = SOURCES / "job_types.yaml") -> list[JobTypeRow]:
    rows: list[dict[str, Any]] = yaml.safe_load(path.read_text())
    loaded = [JobTypeRow(**{**row, "layers": tuple(row.get("layers", ()))}) for row in rows]
    for row in loaded:
        # A gated type decodes untrusted bytes: it reads the files table and never writes it.
        if row.gated and row.files_table_grant:
            raise ValueError(f"{row.type}: a gated type only reads the files table")
        if not row.gated and not row.files_table_grant:
            raise ValueError(f"{row.type}: an ungated type names its files_table_grant")
    return loaded


def _comment(note: str) -> str:
    return "\n".join(f"# {line}" if line else "#" for line in note.rstrip("\n").split("\n"))


def _noted(note: str, text: str) -> str:
    return f"{_comment(note)}\n{text}" if note else text


def _sizing(row: JobTypeRow) -> str:
    lines = [_noted(row.memory_note, f"MemorySize: {row.memory}"), f"Timeout: {row.timeout}"]
    if row.ephemeral_storage is not None:
        storage = f"EphemeralStorage:\n  Size: {row.ephemeral_storage}"
        lines.append(_noted(row.ephemeral_storage_note, storage))
    return "\n".join(lines)


def _layers(row: JobTypeRow) -> str:
    if not row.layers:
        return ""
    refs = ", ".join(f"!Ref {layer}" for layer in row.layers)
    return f"{_LAYERS_NOTE}\nLayers: [{refs}]"


def _names(row: JobTypeRow) -> dict[str, str]:
    """The forms of its name: ThumbnailGeneration, thumbnail_generation, THUMBNAIL_GENERATION,
    thumbnail-generation."""
    return {
        "Name": row.name,
        "type": row.type,
        "TYPE": row.type.upper(),
        "kebab": row.type.replace("_", "-"),
    }


def _substitute(line: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], line)


def _values(row: JobTypeRow, rows: list[JobTypeRow], sources: Path) -> dict[str, str]:
    """What each placeholder and slot of a part becomes for this row."""
    first = rows[0]
    policies = ["!Ref WriteTracesPolicy"]
    if not row.writes_scan_verdict:
        policies.append("!Ref ScanVerdictIsTheScansPolicy")
    after = row.resources_after_worker
    return {
        **_names(row),
        "timeout": str(row.timeout),
        # The queues' visibility is 6 x the worker's timeout (AWS's advice for SQS event sources).
        "visibility_timeout": str(6 * row.timeout),
        "depends_on": _noted(row.depends_on_note, f"DependsOn: {row.depends_on}")
        if row.depends_on
        else "",
        "layers": _layers(row),
        "sizing": _sizing(row),
        "environment": row.environment,
        "normal_lane_batch_size": _ONE_JOB_A_BATCH_WHY
        if row is first
        else f"BatchSize: 1 # one job per invocation: {first.name}Worker says why",
        "managed_policies": f"[{', '.join(policies)}]",
        "files_table_grant": _DECODER_FILES_TABLE_GRANT if row.gated else row.files_table_grant,
        "read_uploads_note": _GATED_READ_UPLOADS_NOTE if row.gated else "",
        "read_uploads_condition": _GATED_READ_UPLOADS_CONDITION if row.gated else "",
        "grants": row.grants,
        # A blank line between the role and what follows it.
        "resources_after_worker": "\n" + (sources / "parts" / after).read_text() if after else "",
    }


def fill(text: str, values: dict[str, str]) -> list[str]:
    """Text with its placeholders replaced; a slot (a placeholder alone on its line) becomes the
    value's lines at the slot's indentation, or nothing when the value is empty."""
    lines: list[str] = []
    for line in text.rstrip("\n").split("\n"):
        slot = _SLOT.match(line)
        if slot and slot.group(2) in values:
            indent, value = slot.group(1), values[slot.group(2)]
            if value:
                lines += [indent + part if part else "" for part in value.rstrip("\n").split("\n")]
            continue
        lines.append(_substitute(line, values))
    return lines


_FILTERS: dict[str | None, Callable[[JobTypeRow], bool]] = {
    None: lambda row: True,
    "sorted": lambda row: True,
    "gated": lambda row: row.gated,
    "ungated": lambda row: not row.gated,
}


def _each(group: list[tuple[str, str]], rows: list[JobTypeRow], kind: str | None) -> list[str]:
    """An `#@each` group (indentation, text) written once per row the filter takes."""
    chosen = [row for row in rows if _FILTERS[kind](row)]
    lines: list[str] = []
    for index, row in enumerate(chosen):
        values = {
            **_names(row),
            "index": str(index),
            "comma_unless_last": "" if index == len(chosen) - 1 else ",",
        }
        lines += [indent + _substitute(text, values) for indent, text in group]
    return lines


def _groups(lines: list[str]) -> Iterator[tuple[str | None, list[tuple[str, str]] | str]]:
    """The lines as runs: (kind, [(indentation, text)]) for an `#@each` group, (None, line) else."""
    index = 0
    while index < len(lines):
        each = _EACH.match(lines[index])
        if not each:
            yield None, lines[index]
            index += 1
            continue
        kind, group = each.group(2), []
        while index < len(lines) and (each := _EACH.match(lines[index])) and each.group(2) == kind:
            group.append((each.group(1), each.group(3)))
            index += 1
        yield kind, group


def _is_item_of(line: str, indent: str) -> bool:
    return line.startswith(f"{indent}- ") and not line.startswith(f"{indent}- -")


def expand_each(lines: list[str], rows: list[JobTypeRow]) -> list[str]:
    """Every `#@each` group replaced by its lines; a sorted group's list sorted with them."""
    out: list[str] = []
    pending_sort: str | None = None  # the indentation of a list still taking items to sort
    for kind, run in _groups(lines):
        if isinstance(run, str):
            if pending_sort is not None and _is_item_of(run, pending_sort):
                out.append(run)
                continue
            if pending_sort is not None:
                out = _sort_tail(out, pending_sort)
                pending_sort = None
            out.append(run)
            continue
        out += _each(run, rows, kind)
        if kind == "sorted":
            pending_sort = run[0][0]
    return _sort_tail(out, pending_sort) if pending_sort is not None else out


def _sort_tail(lines: list[str], indent: str) -> list[str]:
    """The list items ending `lines` (at this indentation) sorted."""
    start = len(lines)
    while start > 0 and _is_item_of(lines[start - 1], indent):
        start -= 1
    return lines[:start] + sorted(lines[start:])


def render(sources: Path = SOURCES) -> str:
    rows = load_rows(sources / "job_types.yaml")
    skeleton = (sources / "skeleton.yaml").read_text().split("\n")
    lines: list[str] = []
    for line in skeleton:
        if line.startswith("#@#"):
            continue
        part = _EACH_PART.match(line)
        if not part:
            lines.append(line)
            continue
        text = (sources / "parts" / part.group(1)).read_text()
        for row in rows:
            lines += [*fill(text, _values(row, rows, sources)), ""]
    queue_metric_ids = ",".join(f"q{index}" for index in range(len(rows)))
    expanded = expand_each(lines, rows)
    return "\n".join(line.replace("{{queue_metric_ids}}", queue_metric_ids) for line in expanded)


def main() -> int:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--check", action="store_true", help="exit 1 if template.yaml differs")
    return write_or_check(
        {TEMPLATE: render()},
        check=arguments.parse_args().check,
        remedy="edit infra/template/ (not template.yaml), then run "
        ".venv/bin/python tools/template.py",
    )


if __name__ == "__main__":
    sys.exit(main())
