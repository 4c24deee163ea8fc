"""Schemathesis against the status API on the local stack: 0 server errors, 0 schema violations.

Starts `filejobs dev` in a scratch copy of the project, uploads two files of two tenants (so
listings and ids have something real behind them), then runs `st run` over the committed OpenAPI
document (layers/filejobs/filejobs/api_docs/openapi.json) at the stack's API with every check,
twice: as the tenant acme (a token from `filejobs token`), then as an operator (the stack's
api_token), whose listings and views differ. tools/schemathesis.toml holds the one exception, with
its reasons. Exits 0 only when both runs pass. schemathesis lives in a tool venv of its own
(`make api-fuzz` installs it), as its pins clash with the project's.

    .venv/bin/python tools/fuzz_api.py --st .tools/schemathesis/bin/st [--max-examples 25]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from filejobs_dev.local import tokens
from filejobs_dev.local.launch import launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
OPENAPI = ROOT / "layers" / "filejobs" / "filejobs" / "api_docs" / "openapi.json"
CONFIG = ROOT / "tools" / "schemathesis.toml"


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
            callers = {
                "tenant acme": tokens.mint(stack.config["token_secret"], "acme"),
                "operator": stack.config["api_token"],
            }
            failed = [
                name
                for name, token in callers.items()
                if run_schemathesis(arguments, stack.config["api_url"], name, token) != 0
            ]
    print("schemathesis:", f"failed as {', '.join(failed)}" if failed else "passed as every caller")
    return 1 if failed else 0


def run_schemathesis(arguments: argparse.Namespace, url: str, caller: str, token: str) -> int:
    command = [
        arguments.st, "--config-file", str(CONFIG), "run", str(OPENAPI),
        "--url", url,
        "--header", f"Authorization: Bearer {token}",
        "--checks", "all",
        "--max-examples", str(arguments.max_examples),
        "--seed", "20261130",
    ]  # fmt: skip
    shown = " ".join(c if "Bearer" not in c else "'Authorization: …'" for c in command)
    print(f"schemathesis as {caller}: {shown}", flush=True)
    return subprocess.run(command, check=False).returncode  # noqa: S603 (our tool)


if __name__ == "__main__":
    sys.exit(main())
