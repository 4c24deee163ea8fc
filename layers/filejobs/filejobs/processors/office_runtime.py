"""Where LibreOffice's `soffice` is, and the environment it runs with.

Locally it is Debian's (`libreoffice-*-nogui`, installed by `make system-deps`), found on PATH
or named by FILEJOBS_SOFFICE.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from filejobs.config import ConfigurationError


@dataclass(frozen=True)
class OfficeProgram:
    """soffice's argv prefix and the environment it needs beside the caller's own."""

    argv: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    version: str | None = None  # "LibreOffice 7.4.7.2", where known


def soffice() -> OfficeProgram:
    named = os.environ.get("FILEJOBS_SOFFICE") or shutil.which("soffice")
    if not named:
        raise ConfigurationError(
            "LibreOffice's soffice is not installed (make system-deps installs "
            "libreoffice-writer-nogui, -calc-nogui and -impress-nogui)"
        )
    return OfficeProgram((named,))
