"""The LibreOffice layer's cold start: what the document worker pays once per execution
environment to unpack the layer's archive to /tmp, against GNU tar unpacking the same archive.

- `tar -I zstd -xf` (the baseline): GNU tar reading through the zstd program, into an empty
  folder.
- ours: `processors/office_runtime.py` `unpacked_layer` into an empty /tmp: the manifest read,
  the free space checked, the archive decompressed by python-zstandard and unpacked by Python's
  tarfile with the "data" filter beside its final place, fonts.conf written, the folder renamed
  into place, then every file hashed against the layer's tree.json (the tree is never run
  unverified).

Runs alternate (baseline, ours) so machine noise hits both alike; medians are printed with the
ratio to the baseline measured in the same run. The layer is built first (infra/layers/
libreoffice/debs.py install, about 2 minutes) unless --layer names a built one (the folder holding
libreoffice/layer.json).

    .venv/bin/python bench/office_layer_unpack.py [--layer DIR] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

from filejobs.processors import office_runtime  # noqa: E402


def built_layer(scratch: Path) -> Path:
    subprocess.run(  # noqa: S603 (our own build script)
        [
            sys.executable,
            str(ROOT / "infra/layers/libreoffice/debs.py"),
            "install",
            "--dest",
            str(scratch),
        ],
        check=True,
    )
    return scratch


def with_tar(archive: Path, into: Path) -> float:
    into.mkdir()
    begin = time.perf_counter()
    unpack = ["tar", "-I", "zstd", "-xf", str(archive), "-C", str(into)]
    subprocess.run(unpack, check=True)  # noqa: S603 (tar and zstd on our own archive)
    return time.perf_counter() - begin


def ours(layer: Path, tmp: Path) -> float:
    tmp.mkdir()
    office_runtime.forget_verified()
    begin = time.perf_counter()
    office_runtime.unpacked_layer(layer, into=tmp)
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", type=Path, help="a built LibreOfficeLayer (default: build one)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="office-unpack-bench-") as folder:
        scratch = Path(folder)
        built = arguments.layer or built_layer(scratch / "build")
        layer = built / "libreoffice"
        manifest = json.loads((layer / "layer.json").read_text())
        archive = layer / manifest["archive"]
        times: dict[str, list[float]] = {"tar": [], "ours": []}
        for run in range(arguments.runs):
            times["tar"].append(with_tar(archive, scratch / f"tar-{run}"))
            times["ours"].append(ours(layer, scratch / f"tmp-{run}"))
            shutil.rmtree(scratch / f"tar-{run}")
            shutil.rmtree(scratch / f"tmp-{run}")
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"LibreOffice {manifest['libreoffice']}: {manifest['archive_bytes'] / 1e6:.1f} MB archive, "
        f"{manifest['unpacked_bytes'] / 1e6:.1f} MB in {manifest['files']} files unpacked"
    )
    print(f"medians of {arguments.runs} runs, seconds (ratio: over tar, same run)")
    base = medians["tar"]
    print(f"{'tar -I zstd':<12} {base:>6.2f}")
    print(f"{'ours':<12} {medians['ours']:>6.2f} ({medians['ours'] / base:.2f}x)")
    if arguments.json:
        arguments.json.write_text(json.dumps({"manifest": manifest, "medians": medians}, indent=2))


if __name__ == "__main__":
    main()
