"""The manual's code examples (docs/snippets/) run as a reader runs them, against stand-ins.

`run` runs shell snippets one after another in one bash, in a folder that has the local stack's
`.filejobs/local.json`, with `curl`, `filejobs`, `aws` and `sam` on PATH replaced by a recorder:
each call is kept (its program and arguments) and answers nothing. A test then checks each call
with the code that would have answered it (the API's parsing, the CLI's parser, the API itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = ROOT / "docs" / "snippets"
RECORDED = ("curl", "filejobs", "aws", "sam")

# What `make dev` would have written: the values the snippets read from .filejobs/local.json.
LOCAL = {
    "endpoint_url": "http://127.0.0.1:4566",
    "api_url": "http://127.0.0.1:3000",
    "api_token": "local-operator-token",
    "uploads_bucket": "filejobs-uploads-local",
}

_RECORDER = """#!{python}
import json, os, sys
with open(os.environ["SNIPPET_CALLS"], "a") as calls:
    calls.write(json.dumps([os.path.basename(sys.argv[0]), sys.argv[1:]]) + "\\n")
"""


@dataclass(frozen=True)
class Call:
    program: str
    argv: list[str]

    def option(self, flag: str) -> list[str]:
        """Every value given after `flag` (curl's -H, -X, -d)."""
        return [self.argv[i + 1] for i, word in enumerate(self.argv[:-1]) if word == flag]

    @property
    def url(self) -> str:
        return next(word for word in self.argv if word.startswith("http"))


def snippet(name: str) -> str:
    return (SNIPPETS / name).read_text()


def run(names: list[str], folder: Path, env: dict[str, str] | None = None) -> list[Call]:
    """Runs the snippets in order in one bash under `set -eu` (an unset variable fails it) and
    returns the recorded calls."""
    (folder / ".filejobs").mkdir(parents=True, exist_ok=True)
    (folder / ".filejobs" / "local.json").write_text(json.dumps(LOCAL))
    stubs = folder / "bin"
    stubs.mkdir(exist_ok=True)
    for program in RECORDED:
        stub = stubs / program
        stub.write_text(_RECORDER.format(python=sys.executable))
        stub.chmod(0o755)
    calls = folder / "calls.jsonl"
    calls.write_text("")
    script = "set -eu\n" + "\n".join(f"source {SNIPPETS / name}" for name in names)
    subprocess.run(
        ["bash", "-c", script],
        cwd=folder,
        env={
            **os.environ,
            "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
            "SNIPPET_CALLS": str(calls),
            **(env or {}),
        },
        check=True,
        timeout=60,
    )
    return [Call(*json.loads(line)) for line in calls.read_text().splitlines()]
