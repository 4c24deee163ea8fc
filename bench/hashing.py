"""Streaming SHA-256 (the deduplication check's core loop) against `sha256sum`, same run.

The loop is processors.dedup.sha256_of, fed 1 MiB chunks (ObjectSource's chunk size) from a
local 1 GiB file, so the figure is the hashing, not the network. Each sample is a fresh process
timed by wall clock (ours pays the interpreter's start-up, sha256sum its own), interleaved with
the baselines' (`sha256sum`, `openssl dgst -sha256`) so machine noise hits all alike; medians are
compared. Target: ours >= 0.8x openssl's rate. Peak RSS of each process comes from
getrusage(RUSAGE_CHILDREN) in a wrapper process that runs only it. With `--json PATH`, the
figures are also written there as a row of the report's Processors table (bench/common.py).
`--mib` is `--size-mb` by another name.

    .venv/bin/python bench/hashing.py [--size-mb 1024] [--runs 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import (
    MiB,
    add_json_argument,
    file_chunks,
    interleaved,
    make_section,
    markdown_command,
    markdown_row,
    peak_rss_mb,
    size_label,
    target,
    timed,
    utc_now,
    verdict,
    write_section,
)

TARGET_VS_OPENSSL = 0.8


def make_file(path: Path, size: int) -> None:
    block = os.urandom(8 * MiB)
    with path.open("wb") as out:
        for _ in range(size // len(block)):
            out.write(block)
        out.write(block[: size % len(block)])


def ours(path: Path) -> list[str]:
    return [sys.executable, __file__, "--child", str(path)]


def child(path: Path) -> None:
    from filejobs.processors.dedup import sha256_of  # noqa: PLC0415 (the child's work only)

    digest, _ = sha256_of(file_chunks(path))
    print(digest)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", "--mib", type=int, default=1024, help="MiB to hash (1024)")
    parser.add_argument("--runs", type=int, default=5, help="samples per contender (5)")
    add_json_argument(parser)
    parser.add_argument("--child", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.runs < 1 or args.size_mb < 1:
        parser.error("--runs and --size-mb must be at least 1")
    measured_at = utc_now()
    size = args.size_mb * MiB
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "object.bin"
        make_file(path, size)
        baseline = ["sha256sum", str(path)]
        openssl = ["openssl", "dgst", "-r", "-sha256", str(path)]  # -r: sha256sum's format
        timed(baseline)  # warm the page cache
        samples = interleaved(
            {"ours": ours(path), "baseline": baseline, "openssl": openssl}, args.runs
        )
        for mine, *theirs in zip(
            samples["ours"], samples["baseline"], samples["openssl"], strict=True
        ):
            digests = {sample.stdout.split()[0] for sample in (mine, *theirs)}
            assert len(digests) == 1, f"digests differ: {digests}"
        ours_s = [sample.seconds for sample in samples["ours"]]
        base_s = [sample.seconds for sample in samples["baseline"]]
        openssl_s = [sample.seconds for sample in samples["openssl"]]
        ours_rss, base_rss = peak_rss_mb(ours(path))[1], peak_rss_mb(baseline)[1]
    ours_rate = size / MiB / statistics.median(ours_s)
    base_rate = size / MiB / statistics.median(base_s)
    print(f"SHA-256 of {args.size_mb} MiB, median of {args.runs} interleaved runs")
    print(f"  ours (sha256_of, 1 MiB chunks): {ours_rate:8.1f} MiB/s  peak RSS {ours_rss:6.1f} MB")
    print(f"  sha256sum:                      {base_rate:8.1f} MiB/s  peak RSS {base_rss:6.1f} MB")
    print(f"  ratio ours/sha256sum: {ours_rate / base_rate:.2f}x (target >= 0.8x)")
    openssl_rate = size / MiB / statistics.median(openssl_s)
    print(
        f"  (openssl dgst -sha256: {openssl_rate:.1f} MiB/s,"
        f" ours/openssl {ours_rate / openssl_rate:.2f}x)"
    )
    rates = {"ours": ours_rate, "sha256sum": base_rate, "openssl": openssl_rate}
    write_section(args.json, section(args.size_mb, rates, ours_rss, base_rss, measured_at))


def section(
    mib: int, rates: dict[str, float], ours_rss: float, base_rss: float, measured_at: str
) -> dict[str, Any]:
    """The Processors table's row from the median rates (MiB/s) and peak RSS (MB)."""
    ours_rate, sum_rate, openssl_rate = rates["ours"], rates["sha256sum"], rates["openssl"]
    vs_sum, vs_openssl = ours_rate / sum_rate, ours_rate / openssl_rate
    met = vs_openssl >= TARGET_VS_OPENSSL
    row = {
        "what": "sha256_streamed",
        "mib": mib,
        "ours_mib_per_s": round(ours_rate, 1),
        "sha256sum_mib_per_s": round(sum_rate, 1),
        "openssl_mib_per_s": round(openssl_rate, 1),
        "vs_sha256sum": round(vs_sum, 3),
        "vs_openssl": round(vs_openssl, 3),
        "ours_peak_mb": round(ours_rss, 1),
        "sha256sum_peak_mb": round(base_rss, 1),
    }
    markdown = markdown_row(
        [
            f"SHA-256 of {size_label(mib)}, streamed",
            markdown_command(),
            f"{ours_rate:.0f} MiB/s",
            f"`sha256sum` {sum_rate:.0f} MiB/s; `openssl dgst -sha256` {openssl_rate:.0f} MiB/s",
            f"{vs_sum:.2f}x sha256sum, {vs_openssl:.2f}x openssl",
            f">= {TARGET_VS_OPENSSL}x openssl: {verdict(met)}",
            f"{ours_rss:.0f} MB",
        ]
    )
    goal = target(
        "SHA-256, streamed: our rate / openssl dgst -sha256's",
        f">= {TARGET_VS_OPENSSL}x",
        vs_openssl,
        met,
    )
    return make_section("processors", [row], [markdown], [goal], measured_at)


if __name__ == "__main__":
    main()
