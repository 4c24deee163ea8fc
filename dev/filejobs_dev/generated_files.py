"""Files the project writes from its own sources (template.yaml, the OpenAPI document, docs
pages and tables), written or checked the same way by every tool under tools/ that makes one.

    write_or_check({path: text}, check=arguments.check, remedy="run .venv/bin/python tools/x.py")
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_or_check(files: Mapping[Path, str], *, check: bool, remedy: str) -> int:
    """Writes each file its text, or with `check` writes nothing and answers 1 when a file
    holds other text than it would be given (or is missing), naming each and the `remedy`."""
    if check:
        stale = [path for path, text in files.items() if not _holds(path, text)]
        for path in stale:
            print(
                f"{_shown(path)} differs from what it is generated from: {remedy}", file=sys.stderr
            )
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {_shown(path)}")
    return 0


def _holds(path: Path, text: str) -> bool:
    return path.is_file() and path.read_text(encoding="utf-8") == text


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
