"""The LibreOffice layer's cold start, one layer against another: what an execution environment
pays before its first preview, the layer's archive unpacked and a first DOCX converted with a
profile soffice never started with. Made to compare the Debian 12 layer (LibreOffice 7.4 on its
own glibc, started through the layer's loader) with the Debian 11 one it replaced (7.0.4 on
Lambda's glibc).

For each layer, alternating (old, new, old, new...) so machine noise hits both alike:

- unpack: `tar -I zstd -xf` of its archive into an empty folder (the same way for both);
- verify (the new layer only): `office_runtime.unpacked_layer`'s whole path instead of tar:
  python-zstandard, tarfile's data filter, then every file hashed against tree.json;
- first conversion: the arm64 soffice.bin under qemu-user converting the layer smoke's DOCX to
  PDF with a fresh profile, restarted once when it asks (exit 81) as the worker does. A layer
  with a loader in its manifest is started through it; an older one runs under qemu's -L with
  the glibc of --old-sysroot (bullseye's libc6 unpacked) and LD_LIBRARY_PATH, as its smoke did.

qemu makes the conversions several times slower than on Lambda's arm64; the ratio between the
layers is the figure to read. qemu emulates Lambda's CPU (Graviton2, `--qemu-cpu neoverse-n1`
by default): under qemu's default (`max`, with SVE) Debian 12's glibc picks SVE string
functions Graviton2 does not have, which qemu runs far slower than they would run anywhere.
Medians, and each median's ratio to the old layer's.

    .venv/bin/python bench/office_cold_start.py --old OLD_BUILD --new NEW_BUILD \
        --old-sysroot SYSROOT [--runs 3] [--json PATH]

(OLD_BUILD and NEW_BUILD: folders holding libreoffice/layer.json, as `debs.py install --dest`
writes them.)
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
sys.path.insert(0, str(ROOT / "infra" / "layers" / "libreoffice"))

import debs as layer_build  # type: ignore[import-not-found]  # noqa: E402 (infra/layers/libreoffice)

from filejobs.processors import office_runtime  # noqa: E402

QEMU = "qemu-aarch64-static"
RESTART = 81


def unpack_with_tar(layer: Path, into: Path) -> float:
    manifest = json.loads((layer / "layer.json").read_text())
    into.mkdir()
    begin = time.perf_counter()
    unpack = ["tar", "-I", "zstd", "-xf", str(layer / manifest["archive"]), "-C", str(into)]
    subprocess.run(unpack, check=True)  # noqa: S603 (tar and zstd on our own archive)
    return time.perf_counter() - begin


def unpack_and_verify(layer: Path, into: Path) -> float:
    into.mkdir()
    office_runtime.forget_verified()
    begin = time.perf_counter()
    office_runtime.unpacked_layer(layer, into=into)
    return time.perf_counter() - begin


def soffice_argv(layer: Path, tree: Path, old_sysroot: Path) -> tuple[list[str], dict[str, str]]:
    """How the layer's soffice.bin is run under qemu, and the environment it needs."""
    manifest = json.loads((layer / "layer.json").read_text())
    fonts = {"FONTCONFIG_FILE": str(tree / "fontconfig/fonts.conf")}
    if "loader" in manifest:
        loader, program = tree / manifest["loader"], tree / manifest["program"]
        return [QEMU, str(loader), "--library-path", str(tree / "lib"), str(program)], fonts
    program = tree / "program/soffice.bin"
    return [QEMU, "-L", str(old_sysroot), str(program)], {
        **fonts,
        "LD_LIBRARY_PATH": str(tree / "lib"),
    }


def write_fonts_conf(tree: Path) -> None:
    template = (tree / "fontconfig/fonts.conf.in").read_text()
    (tree / "fontconfig/fonts.conf").write_text(template.replace("@LIBREOFFICE_HOME@", str(tree)))


def first_conversion(
    argv: list[str], environment: dict[str, str], document: Path, cpu: str
) -> float:
    """Seconds from a fresh profile to the PDF, a restart included."""
    with tempfile.TemporaryDirectory(prefix="cold-") as private:
        home = Path(private)
        command = [
            *argv, f"-env:UserInstallation={(home / 'profile').as_uri()}", "--headless",
            "--norestore", "--nologo", "--convert-to", "pdf", "--outdir", str(home / "out"),
            str(document),
        ]  # fmt: skip
        env = {
            **environment, "HOME": str(home), "TMPDIR": str(home), "SAL_USE_VCLPLUGIN": "svp",
            "QEMU_CPU": cpu,
        }  # fmt: skip
        begin = time.perf_counter()
        for _ in range(2):
            run = subprocess.run(command, env=env, capture_output=True, check=False)  # noqa: S603
            if run.returncode != RESTART:
                break
        took = time.perf_counter() - begin
        if run.returncode != 0 or not (home / "out" / f"{document.stem}.pdf").is_file():
            raise SystemExit(f"{argv}: exit {run.returncode}: {run.stderr[-500:]!r}")
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--old-sysroot", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--qemu-cpu", default="neoverse-n1", help="the CPU qemu emulates")
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    layers = {"old": arguments.old / "libreoffice", "new": arguments.new / "libreoffice"}
    times: dict[str, list[float]] = {
        name: []
        for name in ("old unpack", "new unpack", "new unpack+verify", "old first", "new first")
    }
    with tempfile.TemporaryDirectory(prefix="office-cold-start-") as folder:
        scratch = Path(folder)
        (document,) = [
            path for path in layer_build.write_documents(scratch / "docs") if path.suffix == ".docx"
        ]
        for run in range(arguments.runs):
            for name, layer in layers.items():
                tree = scratch / f"{name}-{run}"
                times[f"{name} unpack"].append(unpack_with_tar(layer, tree))
                write_fonts_conf(tree)
                argv, environment = soffice_argv(layer, tree, arguments.old_sysroot)
                took = first_conversion(argv, environment, document, arguments.qemu_cpu)
                times[f"{name} first"].append(took)
                shutil.rmtree(tree)
            verified = scratch / f"verified-{run}"
            times["new unpack+verify"].append(unpack_and_verify(layers["new"], verified))
            shutil.rmtree(verified)
    medians = {name: statistics.median(values) for name, values in times.items()}
    versions = {
        name: json.loads((layer / "layer.json").read_text()) for name, layer in layers.items()
    }
    for name, manifest in versions.items():
        print(
            f"{name}: LibreOffice {manifest['libreoffice']}, {manifest['archive_bytes'] / 1e6:.1f}"
            f" MB archive, {manifest['unpacked_bytes'] / 1e6:.1f} MB in {manifest['files']} files"
        )
    print(
        f"medians of {arguments.runs} runs, seconds (ratio: over the old layer, same run; qemu "
        f"-cpu {arguments.qemu_cpu})"
    )
    old_total = medians["old unpack"] + medians["old first"]
    rows = {
        "unpack (tar)": (medians["old unpack"], medians["new unpack"]),
        "first DOCX (qemu)": (medians["old first"], medians["new first"]),
        "cold start": (old_total, medians["new unpack"] + medians["new first"]),
    }
    for label, (old, new) in rows.items():
        print(f"{label:<20} old {old:>6.2f}  new {new:>6.2f} ({new / old:.2f}x)")
    print(f"{'new, worker unpack':<20} {medians['new unpack+verify']:>6.2f} (hashing every file)")
    if arguments.json:
        arguments.json.write_text(json.dumps({"medians": medians, "layers": versions}, indent=2))


if __name__ == "__main__":
    main()
