"""Schemathesis against the status API on the local stack: 0 server errors, 0 schema violations.

Starts `filejobs dev` in a scratch copy of the project, uploads two files (so listings and ids
have something real behind them), then runs `st run` over the committed OpenAPI document
(layers/filejobs/filejobs/api_docs/openapi.json) at the stack's API with the operator token,
with every check. Exits with schemathesis' status. schemathesis lives in a tool venv of its own
(`make api-fuzz` installs it), as its pins clash with the project's.

    .venv/bin/python tools/fuzz_api.py --st .tools/schemathesis/bin/st [--max-examples 25]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from filejobs.local.launch import launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
OPENAPI = ROOT / "layers" / "filejobs" / "filejobs" / "api_docs" / "openapi.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--st", required=True, help="the schemathesis CLI")
    parser.add_argument("--max-examples", type=int, default=25)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="filejobs-fuzz-") as scratch:
        root = project_copy(ROOT, Path(scratch))
        with (Path(scratch) / "stack.log").open("wb") as log, launched(root, output=log) as stack:
            s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
            s3.put_object(Bucket=bucket, Key="uploads/acme/a.txt", Body=b"hello\n" * 100)
            s3.put_object(Bucket=bucket, Key="uploads/globex/b.txt", Body=b"world\n" * 100)
            stack.settled("uploads/acme/a.txt")
            command = [
                arguments.st, "run", str(OPENAPI),
                "--url", stack.config["api_url"],
                "--header", f"Authorization: Bearer {stack.config['api_token']}",
                "--checks", "all",
                "--max-examples", str(arguments.max_examples),
                "--seed", "20261130",
            ]  # fmt: skip
            print(
                "schemathesis:",
                " ".join(c if "Bearer" not in c else "Authorization: …" for c in command),
            )
            return subprocess.run(command, check=False).returncode  # noqa: S603 (our tool)


if __name__ == "__main__":
    sys.exit(main())
