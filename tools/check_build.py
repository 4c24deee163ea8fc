"""Checks a `sam build` output: native code built for each function's architecture, each
function with its layers under Lambda's 250 MB unzipped limit, no dev tooling in what ships, and
every function able to start from what ships alone. Prints the sizes.

SAM builds a layer for x86_64 unless its Metadata says BuildArchitecture, even when every
function using it is arm64, and says nothing: the ELF check is what catches that.

What ships is the runtime only: no layer or function holds a module of the dev tools or the CLI
(filejobs_dev, filejobs_cli), a library only they use (moto, yaml, pytest...), or code of ours
importing one. Then each function is started (tools/layer_import_probe.py: its handler imported,
a worker's processor built) by an interpreter that sees only the function's code and its layers.
A layer's native libraries built for another architecture than this machine's are stood in for
by the same releases built for this machine (pip, --no-deps): the Python around them is the
build's own.

    .venv/bin/python tools/check_build.py BUILD_DIR
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from filejobs_dev.infra.template import FunctionSpec, function_definitions, load_template

# Lambda's limit on a function's code plus all its layers, unzipped.
UNZIPPED_LIMIT = 262_144_000
ELF_MACHINES = {62: "x86_64", 183: "arm64"}
# /tmp a function needs beside what its layers unpack there: the file it works on, and its output.
TMP_HEADROOM = 512 * 2**20
MB = 1_000_000
# Import names that must never reach Lambda: the dev tools, the CLI, and what only they use.
DEV_ONLY = frozenset(
    {"filejobs_dev", "filejobs_cli", "moto", "yaml", "pytest", "_pytest", "mypy", "hypothesis",
     "cfnlint", "werkzeug", "flask", "shtab", "jwt", "tests"}
)  # fmt: skip
PROBE = Path(__file__).with_name("layer_import_probe.py")
HOST_ARCHITECTURE = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
ACCOUNT = "123456789012"


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


def unpacked_on_start(build: Path, layer: str) -> int:
    """Bytes a layer unpacks to /tmp when its function first needs it (the LibreOffice layer's
    archive, as its layer.json says), 0 for a layer used as it is."""
    return sum(
        int(json.loads(manifest.read_text())["unpacked_bytes"])
        for manifest in (build / layer).glob("*/layer.json")
    )


def tmp_problem(name: str, spec: FunctionSpec, unpacked: int) -> str | None:
    """Why the function's /tmp (EphemeralStorage, MB) cannot hold what its layers unpack there
    and a file beside it, if it cannot."""
    if unpacked + TMP_HEADROOM <= spec.ephemeral_storage * 2**20:
        return None
    return (
        f"{name}: unpacks {unpacked / MB:.1f} MB to /tmp, which its EphemeralStorage "
        f"({spec.ephemeral_storage} MB) cannot hold with {TMP_HEADROOM // 2**20} MiB for a file"
    )


def python_root(build: Path, part: str) -> Path:
    """Where a part's Python lives: a layer's python/ folder, a function's code folder."""
    layer_python = build / part / "python"
    return layer_python if layer_python.is_dir() else build / part


def distributions(root: Path) -> list[tuple[str, str, bool]]:
    """(name, version, native) of each distribution pip installed under root."""
    found = []
    for info in sorted(root.glob("*.dist-info")):
        metadata = (info / "METADATA").read_text(errors="replace").splitlines()
        fields = dict(line.split(": ", 1) for line in metadata if ": " in line)
        wheel = (info / "WHEEL").read_text(errors="replace") if (info / "WHEEL").is_file() else ""
        native = "Root-Is-Purelib: false" in wheel
        found.append((fields.get("Name", info.name), fields.get("Version", ""), native))
    return found


def owned_by_distributions(root: Path) -> set[str]:
    """Top-level names under root that some distribution's RECORD lists (the rest is ours)."""
    owned: set[str] = set()
    for record in root.glob("*.dist-info/RECORD"):
        for line in record.read_text(errors="replace").splitlines():
            owned.add(line.split(",", 1)[0].split("/", 1)[0])
    return owned


def imported_names(source: Path) -> set[str]:
    """The top-level names a module imports, wherever in it (lazy imports too)."""
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def dev_only_problems(build: Path, part: str) -> list[str]:
    """Dev tooling in a part: a top-level dev-only module, or code of ours importing one."""
    root = python_root(build, part)
    if not root.is_dir():
        return []
    problems = [
        f"{part}: ships {entry.name}, which only the dev tools use"
        for entry in sorted(root.iterdir())
        if entry.name.removesuffix(".py") in DEV_ONLY
    ]
    owned = owned_by_distributions(root)
    for entry in sorted(root.iterdir()):
        if entry.name in owned or entry.name in {"bin", "__pycache__"}:
            continue
        sources = [entry] if entry.suffix == ".py" else sorted(entry.rglob("*.py"))
        for source in sources:
            dev_imports = sorted(imported_names(source) & DEV_ONLY)
            if dev_imports:
                relative = source.relative_to(root)
                problems.append(f"{part}: {relative} imports {', '.join(dev_imports)}")
    return problems


def host_twins(build: Path, layers: list[str], scratch: Path) -> list[Path]:
    """For each layer with native libraries: the same releases built for this machine."""
    twins = []
    for layer in layers:
        native = [
            f"{n}=={v}" for n, v, is_native in distributions(python_root(build, layer)) if is_native
        ]
        if not native:
            continue
        twin = scratch / layer
        if not twin.is_dir():
            subprocess.run(  # noqa: S603 (pip of this interpreter, pinned releases)
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 "--no-deps", "--only-binary=:all:", "--target", str(twin), *native],
                check=True,
            )  # fmt: skip
        twins.append(twin)
    return twins


def placeholder(template: dict[str, Any], value: Any, region: str) -> str:
    """An environment value as the deployed function would see it: a parameter's default, a
    queue's URL, another resource's name or ARN."""
    if not isinstance(value, dict):
        return str(value)
    if "Ref" in value:
        name = str(value["Ref"])
        parameter = template.get("Parameters", {}).get(name)
        if parameter is not None:
            return str(parameter.get("Default", ""))
        kind = template.get("Resources", {}).get(name, {}).get("Type", "")
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{name}"
        return name.lower()
    if "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        name = target[0] if isinstance(target, list) else str(target).split(".")[0]
        return f"arn:aws:lambda:{region}:{ACCOUNT}:{name}"
    return "placeholder"


def start_problem(
    build: Path, name: str, spec: FunctionSpec, template: dict[str, Any], twins: list[Path]
) -> str | None:
    """Why the function cannot start from its build alone, if it cannot."""
    region = "us-east-1"
    environment = {
        key: placeholder(template, value, region) for key, value in spec.environment.items()
    }
    environment |= {
        "AWS_REGION": region, "AWS_DEFAULT_REGION": region, "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_ACCESS_KEY_ID": "probe", "AWS_SECRET_ACCESS_KEY": "probe",
        "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "true",
    }  # fmt: skip
    path = [build / name, *twins, *(python_root(build, layer) for layer in spec.layers)]
    config = {"handler": spec.handler, "path": [str(p) for p in path], "environment": environment}
    with tempfile.TemporaryDirectory(prefix="filejobs-probe-") as home:
        ran = subprocess.run(  # noqa: S603 (our probe, this interpreter)
            [sys.executable, "-I", "-S", str(PROBE), json.dumps(config)],
            capture_output=True, text=True, check=False, cwd=home, timeout=120,
            env={"PATH": os.environ.get("PATH", ""), "HOME": home, "TMPDIR": home},
        )  # fmt: skip
    if ran.returncode == 0:
        return None
    lines = ran.stdout.strip().splitlines()
    try:
        return f"{name} cannot start from its build: {json.loads(lines[-1])['error']}"
    except (IndexError, ValueError, KeyError):
        return f"{name} cannot start from its build: {(ran.stderr or ran.stdout).strip()[-400:]}"


def start_problems(
    build: Path, template: dict[str, Any], functions: dict[str, FunctionSpec]
) -> list[str]:
    host = HOST_ARCHITECTURE.get(platform.machine().lower(), platform.machine())
    problems = []
    with tempfile.TemporaryDirectory(prefix="filejobs-twins-") as scratch:
        for name, spec in sorted(functions.items()):
            foreign = spec.architecture != host
            twins = host_twins(build, spec.layers, Path(scratch)) if foreign else []
            problem = start_problem(build, name, spec, template, twins)
            print(f"start {name:<28} {'ok' if problem is None else 'FAIL'}")
            if problem:
                problems.append(problem)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir", type=Path)
    build = parser.parse_args().build_dir
    template = load_template()
    functions = function_definitions(template)
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
        unpacked = sum(unpacked_on_start(build, layer) for layer in spec.layers)
        if unpacked:
            print(f"{'':<28} {'':<7} unpacks {unpacked / MB:.1f} MB to /tmp on its first use")
        if problem := tmp_problem(name, spec, unpacked):
            problems.append(problem)
    for part in sorted(
        {part for spec in functions.values() for part in spec.layers} | set(functions)
    ):
        problems.extend(dev_only_problems(build, part))
    problems.extend(start_problems(build, template, functions))
    for problem in sorted(set(problems)):
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
