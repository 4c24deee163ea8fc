"""What one decoding job may use, and how a breach reads on the job."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Any

MiB = 1024 * 1024


@dataclass(frozen=True)
class DecoderLimits:
    """Limits applied to the decoding process (setrlimit), checked by the kernel.

    `memory_bytes` is address space (RLIMIT_AS), not resident memory: it includes the libraries
    the zygote imported, so it sits well above what a decode touches. `wall_seconds` is the
    worker's own deadline for a decoder that sleeps or blocks instead of computing.
    """

    memory_bytes: int = 2048 * MiB
    cpu_seconds: int = 30
    open_files: int = 64
    file_bytes: int = 64 * MiB
    reply_bytes: int = 64 * MiB
    wall_seconds: float = 90.0

    def as_message(self) -> dict[str, Any]:
        return {
            "memory_bytes": self.memory_bytes,
            "cpu_seconds": self.cpu_seconds,
            "open_files": self.open_files,
            "file_bytes": self.file_bytes,
        }


def apply(message: dict[str, Any]) -> None:
    """In the decoding process, before it reads a byte: the limits of `as_message`. Soft and hard
    limits are set alike, so the decoder cannot raise them again; CPU gets one second of grace
    between SIGXCPU (soft) and SIGKILL (hard)."""
    cpu = int(message["cpu_seconds"])
    _set(resource.RLIMIT_CORE, 0)
    _set(resource.RLIMIT_CPU, cpu, cpu + 1)
    _set(resource.RLIMIT_NOFILE, int(message["open_files"]))
    _set(resource.RLIMIT_FSIZE, int(message["file_bytes"]))
    _set(resource.RLIMIT_AS, int(message["memory_bytes"]))


def _set(limit: int, soft: int, hard: int | None = None) -> None:
    resource.setrlimit(limit, (soft, soft if hard is None else hard))
