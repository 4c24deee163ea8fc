"""Starts one function as Lambda's runtime would, from a `sam build` alone: run by
tools/check_build.py in an interpreter started with -I -S (no site-packages, no PYTHON*
variables), so every import must come from the function's code and its layers.

    python -I -S tools/layer_import_probe.py '{"handler": "app.handler", "path": [...],
                                                "environment": {...}}'

It imports the handler module (the cold start's init) and, for a worker, builds its processor as
the first record does (the processors import their media libraries there). Prints one JSON line:
{"ok": true} or {"ok": false, "error": "..."}; exits 1 on failure.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def start(handler: str) -> None:
    module_name, _, attribute = handler.rpartition(".")
    module = importlib.import_module(module_name)
    if not callable(getattr(module, attribute, None)):
        raise TypeError(f"{module_name} has no callable {attribute!r}")
    build_processor = getattr(module, "build_processor", None)
    if callable(build_processor):
        build_processor()


def main() -> int:
    config = json.loads(sys.argv[1])
    # Only the function's code and its layers, in Lambda's order; the stdlib stays at the end.
    del sys.path[0]
    sys.path[:0] = config["path"]
    os.environ.update(config["environment"])
    try:
        start(config["handler"])
    except Exception as error:  # every failure is the finding
        last = traceback.extract_tb(error.__traceback__)[-1]
        where = f"{last.filename}:{last.lineno}"
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error} ({where})"}))
        return 1
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
