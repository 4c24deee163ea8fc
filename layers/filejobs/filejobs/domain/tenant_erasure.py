"""A tenant erased ("a customer leaving"): the stages of its operation, pure.

The erasure is a bulk operation (domain/operations.py, `Action.ERASE`) over the tenant's files,
advanced one page a message like any other. Its cursor says which stage it is in, and each page
is recorded by one write conditioned on the cursor it started from, so a page delivered twice is
done and counted once (a page done again before its record finds its work done: nothing twice).

1. SETTINGS: what acts for the tenant, or keeps its data, without being a file stops first: its
   schedules (disarmed, then deleted: no run starts jobs on files being erased), its webhook
   endpoints with their deliveries (before any file: the erasure's own cancellations are
   announced, and must reach no endpoint; a delivery holds an event's body, keys included), its
   presets with every version, its quota overrides and usage counters.
2. FILES: a page of the tenant's files at a time, each erased for good (every version of its key,
   its outputs, jobs and record; services/file_lifecycle.py `erase`), an audit record each.
3. REMAINS: what no file names, at most `REMAINS_BATCH` object versions a page until none is
   left: versions under `uploads/{tenant}/` never ingested (refused, or uploaded while the
   erasure ran), outputs under `derived/{tenant}/` a late worker wrote, quarantined copies under
   `quarantine/{tenant}/`.

The operation and the audit records of each file (`erasures#{tenant}`) are kept: they hold ids,
counts, who, when and why, nothing that was in a file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

# Object versions one page of REMAINS deletes at most (a few DeleteObjects of 1,000).
REMAINS_BATCH = 5000

# What an erasure records it removed, in the order it shows them.
REMOVED_KINDS = (
    "schedules",
    "webhook_endpoints",
    "webhook_deliveries",
    "presets",
    "preset_versions",
    "quota_overrides",
    "usage_days",
    "upload_versions",
    "outputs",
    "jobs",
    "quarantined_versions",
)


class Stage(StrEnum):
    SETTINGS = "settings"
    FILES = "files"
    REMAINS = "remains"


class ErasureCursorError(ValueError):
    """A cursor no erasure wrote."""


@dataclass(frozen=True)
class ErasureStep:
    """Where an erasure stands: its stage; in FILES, the file after which the next page starts;
    in REMAINS, how many pages of remains were done (each page's cursor is its own)."""

    stage: Stage = Stage.SETTINGS
    after: tuple[str, str] | None = None
    round: int = 0

    def to_cursor(self) -> str:
        after = None if self.after is None else list(self.after)
        return json.dumps({"stage": self.stage.value, "after": after, "round": self.round})

    @classmethod
    def from_cursor(cls, cursor: str | None) -> ErasureStep:
        """The step a cursor names; None (a new operation): SETTINGS."""
        if cursor is None:
            return cls()
        try:
            raw = json.loads(cursor)
            after = raw["after"]
            return cls(
                stage=Stage(raw["stage"]),
                after=None if after is None else (str(after[0]), str(after[1])),
                round=int(raw["round"]),
            )
        except (ValueError, TypeError, KeyError, IndexError) as error:
            raise ErasureCursorError("not an erasure's cursor") from error


def removed_total(before: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """The counts of two pages added, kind by kind."""
    given = set(before) | set(more)
    kinds = [k for k in REMOVED_KINDS if k in given] + sorted(given - set(REMOVED_KINDS))
    return {kind: before.get(kind, 0) + more.get(kind, 0) for kind in kinds}
