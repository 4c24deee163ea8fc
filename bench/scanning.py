"""ClamAV per job (`clamscan`, which loads the database for every file) against the warm engine
(one clamd, processors/scan/clamd.py), on the same database and the same files.

No official database can be downloaded here, so the bench makes one of a realistic scale,
seeded and deterministic: N MD5 hash signatures (.hdb `md5:size:Name`, random digests and
sizes), M body signatures (.ndb `Name:0:*:hex`, random patterns of 16 to 64 bytes) and EICAR's
hash, so that detection is checked. It is made once into `--cache` (.filejobs/bench/clamdb/)
and reused while the parameters are the same. The files: 1 MB of mixed content (text lines and
random blocks) and EICAR. Both engines must find EICAR and pass the mixed file before anything
is timed: a benchmark of an engine that finds nothing would be worthless.

Measured, on the full database:

    clamscan per job : wall seconds of `clamscan --database=DB <1 MB file>` with the job's flags
                       (ClamAvScanner.command), a fresh process each run: median of --runs;
                       its peak RSS from getrusage(RUSAGE_CHILDREN) of a wrapper (common.py)
    clamd load       : from starting clamd to its first PONG (ClamdDaemon.start)
    warm scan        : one 1 MB file through ClamdScanner (FILDES): median of --warm-scans,
                       interleaved with the clamscan runs so machine noise hits both alike;
                       clamd runs with the worker's configuration, whose clean-file cache is
                       off, so scanning the same file again is a whole scan, not a cache hit;
                       a clean answer includes the EICAR canary that vouches for it (clamd.py)
    clamd peak RSS   : VmHWM of the clamd process after its scans

and the same at a quarter of the signatures, for the slope per million signatures and a
linear extrapolation to the official database's size (about 9 million signatures), printed
as an extrapolation. Targets: a warm scan of 1 MB <= 0.5 s, and >= 20x faster than clamscan
per job. bench/notes/scanning.md says what the figures mean for the Lambda's sizing.

    .venv/bin/python bench/scanning.py [--hash-signatures 1000000] [--body-signatures 100000]
        [--runs 7] [--warm-scans 21] [--seed 1] [--cache DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    MiB,
    add_json_argument,
    make_section,
    markdown_row,
    peak_rss_mb,
    target,
    timed,
    utc_now,
    verdict,
    write_section,
)

from filejobs.processors.scan.clamd import ClamdDaemon, ClamdScanner
from filejobs.processors.scan.engines import ClamAvScanner, ScanResult

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
EICAR_NAME = "Filejobs.Bench.EICAR"
FILE_SIZE = 1 * MiB
# The official database (main, daily, bytecode) holds about this many signatures.
OFFICIAL_SIGNATURES = 9_000_000
TARGET_WARM_SECONDS = 0.5
TARGET_SPEEDUP = 20.0
# Bumped whenever the generator changes, so a cached database of the old kind is not reused.
FORMAT = 1
LINES_PER_WRITE = 50_000
# The text of the mixed file: words of business documents, as uploads mostly are.
WORDS = (
    "invoice", "total", "amount", "customer", "order", "shipped", "quarterly", "report",
    "revenue", "account", "balance", "payment", "received", "thank", "you", "regards", "please",
    "find", "attached", "the", "draft", "contract", "review", "meeting", "notes", "action",
    "items", "deadline", "budget", "forecast", "approved", "pending", "signature",
)  # fmt: skip


@dataclass(frozen=True)
class Scale:
    """The figures of one database size."""

    hashes: int
    bodies: int
    clamscan_seconds: list[float]
    clamscan_peak_mib: float
    load_seconds: float
    clamd_rss_after_load_mib: float
    clamd_peak_mib: float
    warm_seconds: list[float]

    @property
    def signatures(self) -> int:
        return self.hashes + self.bodies + 1  # EICAR's

    @property
    def clamscan_median(self) -> float:
        return statistics.median(self.clamscan_seconds)

    @property
    def warm_median(self) -> float:
        return statistics.median(self.warm_seconds)

    @property
    def speedup(self) -> float:
        return self.clamscan_median / self.warm_median


# The database and the files.


def database(cache: Path, hashes: int, bodies: int, seed: int) -> Path:
    """The database of these parameters: made once (into a scratch folder, then renamed, so
    an interrupted run leaves nothing half-made), reused afterwards."""
    folder = cache / f"v{FORMAT}-h{hashes}-b{bodies}-s{seed}"
    if (folder / ".complete").exists():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".making-", dir=cache))
    try:
        began = time.perf_counter()
        write_signatures(scratch, hashes, bodies, seed)
        (scratch / ".complete").write_text("")
        shutil.rmtree(folder, ignore_errors=True)
        scratch.rename(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"  made {folder.name} in {time.perf_counter() - began:.1f} s", flush=True)
    return folder


def write_signatures(folder: Path, hashes: int, bodies: int, seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 (seeded for a reproducible database)
    with (folder / "bench.hdb").open("w") as out:
        for start in range(0, hashes, LINES_PER_WRITE):
            out.write(
                "".join(
                    f"{rng.randbytes(16).hex()}:{rng.randrange(1024, 16 * MiB)}"
                    f":Filejobs.Bench.Hash.{n}\n"
                    for n in range(start, min(start + LINES_PER_WRITE, hashes))
                )
            )
    with (folder / "bench.ndb").open("w") as out:
        for start in range(0, bodies, LINES_PER_WRITE):
            out.write(
                "".join(
                    f"Filejobs.Bench.Body.{n}:0:*:{rng.randbytes(rng.randint(16, 64)).hex()}\n"
                    for n in range(start, min(start + LINES_PER_WRITE, bodies))
                )
            )
    md5 = hashlib.md5(EICAR, usedforsecurity=False).hexdigest()
    (folder / "eicar.hdb").write_text(f"{md5}:{len(EICAR)}:{EICAR_NAME}\n")


def mixed_file(path: Path, seed: int) -> Path:
    """1 MB as an upload might be: lines of text between blocks of random (compressed-looking)
    bytes; not zeros, which every engine skims."""
    rng = random.Random(seed + 1_000_003)  # noqa: S311 (seeded: the same file each run)
    body = bytearray()
    while len(body) < FILE_SIZE:
        lines = (" ".join(rng.choices(WORDS, k=12)) for _ in range(rng.randint(5, 40)))
        body += "\n".join(lines).encode() + b"\n"
        body += rng.randbytes(rng.randint(512, 8192))
    path.write_bytes(bytes(body[:FILE_SIZE]))
    return path


# Measuring.


def check(result: ScanResult, infected: bool, what: str) -> None:
    """Exits unless the engine said what it must: a detection, or clean without error."""
    if result.errors or result.refusals or result.infected is not infected:
        raise SystemExit(f"{what}: expected {'a detection' if infected else 'clean'}: {result}")
    if infected and result.signatures != [f"{EICAR_NAME}.UNOFFICIAL"]:
        raise SystemExit(f"{what}: found {result.signatures}, not EICAR")


def vm_kib(pid: int, field: str) -> int:
    """A figure of /proc/<pid>/status, in KiB: VmHWM (peak resident set), VmRSS (now)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} for process {pid}")


def measure(
    scale: tuple[int, int], files: tuple[Path, Path], arguments: argparse.Namespace, run_dir: Path
) -> Scale:
    """Both engines on the database of `scale` (hash and body signatures)."""
    db = database(arguments.cache, *scale, arguments.seed)
    mixed, eicar = files
    clamscan = ClamAvScanner(db, arguments.clamscan)
    check(clamscan.scan(eicar), True, "clamscan on EICAR")
    check(clamscan.scan(mixed), False, "clamscan on the 1 MB file")
    daemon = ClamdDaemon(arguments.clamd, run_dir=run_dir)
    try:
        status = daemon.start(db)
        after_load = vm_kib(status.pid, "VmRSS") / 1024
        warm = ClamdScanner(daemon, db)
        check(warm.scan(eicar), True, "clamd on EICAR")
        check(warm.scan(mixed), False, "clamd on the 1 MB file")
        per_round = math.ceil(arguments.warm_scans / arguments.runs)
        cold_s: list[float] = []
        warm_s: list[float] = []
        for _ in range(arguments.runs):  # interleaved: noise hits both alike
            cold_s.append(timed(clamscan.command(mixed)).seconds)
            for _ in range(per_round):
                began = time.perf_counter()
                result = warm.scan(mixed)
                warm_s.append(time.perf_counter() - began)
                check(result, False, "clamd on the 1 MB file")
        if daemon.pid != status.pid:
            raise SystemExit("clamd was restarted during the bench: its figures are not one run")
        clamd_peak = vm_kib(status.pid, "VmHWM") / 1024
    finally:
        daemon.stop()
    _, clamscan_peak = peak_rss_mb(clamscan.command(mixed))
    return Scale(*scale, cold_s, clamscan_peak, status.load_seconds, after_load, clamd_peak, warm_s)


# Reporting.


@dataclass(frozen=True)
class Line:
    """A figure against the number of signatures: slope per million, value at 9M."""

    small: float
    large: float
    per_million: float
    at_official: float

    @classmethod
    def through(cls, small: Scale, large: Scale, small_y: float, large_y: float) -> Line:
        slope = (large_y - small_y) / (large.signatures - small.signatures)
        at = large_y + slope * (OFFICIAL_SIGNATURES - large.signatures)
        return cls(small_y, large_y, slope * 1_000_000, at)


# The figures fitted against the number of signatures: their Scale attribute and label.
FITTED = {
    "clamd_load_s": ("load_seconds", "clamd load s"),
    "clamd_peak_mib": ("clamd_peak_mib", "clamd peak RSS MiB"),
    "clamscan_per_job_s": ("clamscan_median", "clamscan per job s"),
    "clamscan_peak_mib": ("clamscan_peak_mib", "clamscan peak RSS MiB"),
    "warm_scan_s": ("warm_median", "warm scan s"),
}


def lines(small: Scale, large: Scale) -> dict[str, Line]:
    def line(figure: str) -> Line:
        return Line.through(small, large, _figure(small, figure), _figure(large, figure))

    return {name: line(figure) for name, (figure, _) in FITTED.items()}


def _figure(scale: Scale, name: str) -> float:
    value = getattr(scale, name)
    assert isinstance(value, float)
    return value


def load_average() -> str:
    return ", ".join(f"{n:.2f}" for n in os.getloadavg())


def print_scale(scale: Scale) -> None:
    print(
        f"  {scale.signatures:,} signatures ({scale.hashes:,} .hdb, {scale.bodies:,} .ndb, EICAR)"
    )
    print(
        f"    clamscan per job: median {scale.clamscan_median:.3f} s"
        f" of {len(scale.clamscan_seconds)} runs, peak RSS {scale.clamscan_peak_mib:.0f} MiB"
    )
    print(
        f"    clamd: load {scale.load_seconds:.3f} s, RSS after load"
        f" {scale.clamd_rss_after_load_mib:.0f} MiB, peak RSS {scale.clamd_peak_mib:.0f} MiB"
    )
    print(
        f"    warm scan: median {scale.warm_median:.4f} s of {len(scale.warm_seconds)},"
        f" {scale.speedup:.1f}x faster than clamscan per job"
    )


def print_report(small: Scale, large: Scale, fits: dict[str, Line], loads: list[str]) -> None:
    print(f"warm scan seconds per 1 MB file: {large.warm_median:.4f}")
    print(f"warm speed-up over clamscan per job: {large.speedup:.1f}")
    print(f"  (target: warm scan <= {TARGET_WARM_SECONDS} s, speed-up >= {TARGET_SPEEDUP:g}x)")
    print(
        f"Against the number of signatures ({small.signatures:,} and {large.signatures:,}):"
        f" slope per million, and a LINEAR EXTRAPOLATION to {OFFICIAL_SIGNATURES:,}"
        " (not measured: same mix of signatures as here)"
    )
    for name, fit in fits.items():
        print(
            f"  {FITTED[name][1]:22} {fit.small:9.3f} -> {fit.large:9.3f}"
            f"   per million {fit.per_million:8.3f}   at 9M (extrapolated) {fit.at_official:9.3f}"
        )
    speedup = fits["clamscan_per_job_s"].at_official / fits["warm_scan_s"].at_official
    print(f"  warm speed-up at 9M (extrapolated): {speedup:.1f}x")
    print(f"load average (1, 5, 15 min): {' -> '.join(loads)}")


def cell(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:.1f} s"


def section(
    small: Scale, large: Scale, fits: dict[str, Line], loads: list[str], measured_at: str
) -> dict[str, Any]:
    fast = large.warm_median <= TARGET_WARM_SECONDS
    faster = large.speedup >= TARGET_SPEEDUP
    sigs = f"{large.signatures:,} signatures"
    comparison = [
        "| what | clamscan per job | warm clamd | ratio | target | peak memory |",
        "| --- | --- | --- | --- | --- | --- |",
        markdown_row(
            [
                f"1 MB file, {sigs}",
                cell(large.clamscan_median),
                cell(large.warm_median),
                f"{large.speedup:.1f}x faster",
                f">= {TARGET_SPEEDUP:g}x: {verdict(faster)}; <= {TARGET_WARM_SECONDS} s:"
                f" {verdict(fast)}",
                f"clamscan {large.clamscan_peak_mib:.0f} MiB; clamd {large.clamd_peak_mib:.0f} MiB",
            ]
        ),
        markdown_row(
            [
                "definitions loaded",
                "by every job",
                f"once per environment: {cell(large.load_seconds)}",
                "",
                "",
                f"clamd after load {large.clamd_rss_after_load_mib:.0f} MiB",
            ]
        ),
    ]
    scaling = [
        "| signatures | clamd load | clamd peak RSS | warm scan | clamscan per job"
        " | clamscan peak RSS |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for scale in (small, large):
        scaling.append(
            markdown_row(
                [
                    f"{scale.signatures:,}",
                    cell(scale.load_seconds),
                    f"{scale.clamd_peak_mib:.0f} MiB",
                    cell(scale.warm_median),
                    cell(scale.clamscan_median),
                    f"{scale.clamscan_peak_mib:.0f} MiB",
                ]
            )
        )
    load, rss = fits["clamd_load_s"], fits["clamd_peak_mib"]
    per_job, per_job_rss = fits["clamscan_per_job_s"], fits["clamscan_peak_mib"]
    warm = fits["warm_scan_s"]
    scaling += [
        markdown_row(
            [
                "per million signatures (slope)",
                cell(load.per_million),
                f"{rss.per_million:.0f} MiB",
                cell(warm.per_million),
                cell(per_job.per_million),
                f"{per_job_rss.per_million:.0f} MiB",
            ]
        ),
        markdown_row(
            [
                f"**{OFFICIAL_SIGNATURES:,}: linear extrapolation, not measured**",
                cell(load.at_official),
                f"{rss.at_official:.0f} MiB",
                cell(warm.at_official),
                cell(per_job.at_official),
                f"{per_job_rss.at_official:.0f} MiB",
            ]
        ),
    ]
    markdown = [
        *comparison,
        "",
        *scaling,
        "",
        f"Database: {large.hashes:,} random MD5 hash signatures (.hdb) and {large.bodies:,}"
        " random body signatures of 16-64 bytes (.ndb), plus EICAR's hash; the smaller one a"
        f" quarter of that. Median of {len(large.clamscan_seconds)} clamscan runs and"
        f" {len(large.warm_seconds)} warm scans, interleaved. Load average (1, 5, 15 min)"
        f" {' at the start, then '.join(loads)} at the end.",
    ]
    rows = [_row(scale) for scale in (small, large)]
    rows.append(
        {
            "extrapolated_to": OFFICIAL_SIGNATURES,
            **{name: round(fit.at_official, 3) for name, fit in fits.items()},
            **{f"{name}_per_million": round(fit.per_million, 3) for name, fit in fits.items()},
        }
    )
    targets = [
        target(
            "ClamAV warm scan of a 1 MB file (clamd), seconds",
            f"<= {TARGET_WARM_SECONDS}",
            large.warm_median,
            fast,
        ),
        target(
            "ClamAV warm scan: speed-up over clamscan per job",
            f">= {TARGET_SPEEDUP:g}x",
            large.speedup,
            faster,
        ),
    ]
    built = make_section("scanning", rows, [], targets, measured_at)
    return {**built, "markdown": markdown}


def _row(scale: Scale) -> dict[str, Any]:
    return {
        "signatures": scale.signatures,
        "hash_signatures": scale.hashes,
        "body_signatures": scale.bodies,
        "clamscan_per_job_s": round(scale.clamscan_median, 4),
        "clamscan_peak_mib": round(scale.clamscan_peak_mib, 1),
        "clamd_load_s": round(scale.load_seconds, 4),
        "clamd_rss_after_load_mib": round(scale.clamd_rss_after_load_mib, 1),
        "clamd_peak_mib": round(scale.clamd_peak_mib, 1),
        "warm_scan_s": round(scale.warm_median, 5),
        "speedup": round(scale.speedup, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hash-signatures", type=int, default=1_000_000, help="(1,000,000)")
    parser.add_argument("--body-signatures", type=int, default=100_000, help="(100,000)")
    parser.add_argument("--runs", type=int, default=7, help="clamscan runs per scale (7)")
    parser.add_argument("--warm-scans", type=int, default=21, help="warm scans per scale (21)")
    parser.add_argument("--seed", type=int, default=1, help="of the database and file (1)")
    parser.add_argument("--cache", type=Path, default=ROOT / ".filejobs" / "bench" / "clamdb")
    parser.add_argument("--clamscan", default="clamscan")
    parser.add_argument("--clamd", default="/usr/sbin/clamd")
    add_json_argument(parser)
    arguments = parser.parse_args()
    if min(arguments.runs, arguments.warm_scans) < 1:
        parser.error("--runs and --warm-scans must be at least 1")
    if min(arguments.hash_signatures, arguments.body_signatures) < 4:
        parser.error("--hash-signatures and --body-signatures must be at least 4")
    measured_at, loads = utc_now(), [load_average()]
    hashes, bodies, seed = arguments.hash_signatures, arguments.body_signatures, arguments.seed
    for sizes in ((hashes // 4, bodies // 4), (hashes, bodies)):
        database(arguments.cache, *sizes, seed)  # made before anything is timed
    measured = []
    with tempfile.TemporaryDirectory(prefix="fj-scan-") as scratch:
        files = (mixed_file(Path(scratch) / "mixed.bin", seed), Path(scratch) / "eicar.com")
        files[1].write_bytes(EICAR)
        for sizes in ((hashes // 4, bodies // 4), (hashes, bodies)):
            scale = measure(sizes, files, arguments, Path(scratch) / "run")
            print_scale(scale)
            measured.append(scale)
    loads.append(load_average())
    small, large = measured
    fits = lines(small, large)
    print_report(small, large, fits, loads)
    write_section(arguments.json, section(small, large, fits, loads, measured_at))


if __name__ == "__main__":
    main()
