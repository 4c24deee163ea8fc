"""What one conditional write of a transition did: applied, or lost the race (a value, not an
exception)."""

from __future__ import annotations

from dataclasses import dataclass

from filejobs.domain.job import ProcessingJob
from filejobs.domain.transitions import Conflict


@dataclass(frozen=True)
class Applied:
    """The write happened; `job` is the item as stored after it."""

    job: ProcessingJob


@dataclass(frozen=True)
class Lost:
    """The guard did not hold. `current` is the item as it was (None if there is none)."""

    conflict: Conflict
    current: ProcessingJob | None


type TransitionResult = Applied | Lost
