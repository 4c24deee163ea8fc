"""What a processor is, and how it stops early."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from filejobs.domain.job import ProcessingJob


class StopRequested(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by a processor that noticed its job was cancelled or taken over."""


# Does the job's work on its object and returns result_data; calls `should_stop` (the second
# argument) often and raises StopRequested when it turns true.
type Processor = Callable[[ProcessingJob, Callable[[], bool]], dict[str, Any]]
