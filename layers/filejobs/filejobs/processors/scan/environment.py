"""What the ClamAV programs (clamd, clamscan, freshclam) see of the worker's environment."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def isolated_environment(program: str, **extra: str) -> dict[str, str]:
    """The environment a ClamAV program gets: nothing secret, its own libraries first.

    No AWS credentials (Lambda passes them in the environment) reach a process that parses
    hostile files or talks to a mirror: only PATH, TMPDIR (unless `extra` says otherwise),
    `extra`, and, for a program shipped with its libraries (the ClamAV layer: /opt/clamav/bin
    and /opt/clamav/lib), LD_LIBRARY_PATH pointing at those libraries alone, so they never meet
    the Python runtime's.
    """
    env = {"PATH": os.environ.get("PATH", os.defpath), "TMPDIR": tempfile.gettempdir(), **extra}
    bundled = Path(program).parent.parent / "lib"
    if Path(program).is_absolute() and bundled.is_dir():
        env["LD_LIBRARY_PATH"] = str(bundled)
    return env
