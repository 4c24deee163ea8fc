"""Checks a `sam build` output: native code built for each function's architecture, and each
function with its layers under Lambda's 250 MB unzipped limit. Prints the sizes.

SAM builds a layer for x86_64 unless its Metadata says BuildArchitecture, even when every
function using it is arm64, and says nothing: the ELF check is what catches that.

    .venv/bin/python tools/check_build.py BUILD_DIR
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections import Counter
from pathlib import Path

from filejobs.infra.template import function_definitions, load_template

# Lambda's limit on a function's code plus all its layers, unzipped.
UNZIPPED_LIMIT = 262_144_000
ELF_MACHINES = {62: "x86_64", 183: "arm64"}
MB = 1_000_000


def tree_size(root: Path) -> int:
    return sum(
        (Path(folder) / name).lstat().st_size
        for folder, _, names in os.walk(root)
        for name in names
    )


def elf_machines(root: Path) -> Counter[tuple[str, str]]:
    """(machine, path) of every ELF file under root; the machine by its ELF header."""
    found: Counter[tuple[str, str]] = Counter()
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            with path.open("rb") as file:
                header = file.read(20)
            if len(header) < 20 or header[:4] != b"\x7fELF":
                continue
            order = "<" if header[5] == 1 else ">"
            (machine,) = struct.unpack(order + "H", header[18:20])
            found[(ELF_MACHINES.get(machine, f"machine {machine}"), str(path))] += 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir", type=Path)
    build = parser.parse_args().build_dir
    functions = function_definitions(load_template())
    problems: list[str] = []
    sizes: dict[str, int] = {}
    print(f"{'function':<28} {'arch':<7} {'code':>8} {'layers':>9} {'total MB':>9}  layers")
    for name, spec in sorted(functions.items()):
        parts = [name, *spec.layers]
        for part in parts:
            if part not in sizes:
                sizes[part] = tree_size(build / part)
            wrong = [p for machine, p in elf_machines(build / part) if machine != spec.architecture]
            if wrong:
                problems.append(
                    f"{part}: {len(wrong)} native files not built for {spec.architecture}"
                    f" (e.g. {wrong[0]})"
                )
        total = sum(sizes[p] for p in parts)
        layers = sum(sizes[p] for p in spec.layers)
        print(
            f"{name:<28} {spec.architecture:<7} {sizes[name] / 1e3:>6.0f}kB {layers / MB:>9.1f}"
            f" {total / MB:>9.1f}  {', '.join(spec.layers)}"
        )
        if total > UNZIPPED_LIMIT:
            problems.append(f"{name}: {total / MB:.1f} MB unzipped, over Lambda's 262.1 MB")
    for problem in sorted(set(problems)):
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
