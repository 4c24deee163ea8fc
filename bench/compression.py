"""zstd streaming compression (the compression processor's core loop) against `zstd -3`, and the
processor's peak memory compressing a 1 GiB S3 object.

Speed: processors.compression.CompressionPass (zstd level 3, the original's SHA-256 in the same
pass) fed 1 MiB chunks (ObjectSource's chunk size) from a local 1 GiB CSV-like file, output
to /dev/null, against `zstd -3` reading the same file. Each sample is a fresh process timed by
wall clock, interleaved with the baseline's; medians are compared. Target: ours >= 0.8x.

Memory: the whole processor (ranged GET to sniff, streamed GET, zstd, multipart upload through
JobOutputs.put_stream) on a 1 GiB object in a moto server running in its own process, so the
figure is the worker's alone: getrusage(RUSAGE_CHILDREN) in a wrapper process that runs only
the worker. Target: peak RSS < 100 MB.

With `--json PATH`, the figures are also written there as a row of the report's Processors table
(bench/common.py). `--mib` is `--size-mb` by another name.

    .venv/bin/python bench/compression.py [--size-mb 1024] [--runs 5] [--skip-memory] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
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

TARGET_VS_ZSTD = 0.8
TARGET_PEAK_MB = 100


def make_csv(path: Path, size: int) -> None:
    """CSV-like rows (seeded random values): a 32 MiB block, repeated up to `size`."""
    rng = random.Random(1)  # noqa: S311 (test data, not secrets)
    cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Quebec", "Perth", "Tunis"]
    rows: list[str] = []
    total = 0
    while total < 32 * MiB:
        row = (
            f"{len(rows)},{rng.choice(cities)},{rng.randint(1, 10**6)},"
            f"{rng.uniform(0, 1000):.4f},{rng.getrandbits(64):016x},"
            f"{'restocked' if rng.random() < 0.2 else ''}\n"
        )
        rows.append(row)
        total += len(row)
    block = "".join(rows).encode()
    with path.open("wb") as out:
        for _ in range(size // len(block)):
            out.write(block)
        out.write(block[: size % len(block)])


def ours(path: Path, into: str = os.devnull) -> list[str]:
    return [sys.executable, __file__, "--child-local", str(path), into]


def child_local(path: Path, into: Path) -> None:
    from filejobs.processors.compression import ZSTD, CompressionPass, Settings  # noqa: PLC0415

    compression = CompressionPass(Settings(ZSTD, 3))
    with into.open("wb") as out:
        for piece in compression.run(file_chunks(path)):
            out.write(piece)
    print(compression.compressed_bytes, compression.sha256)


def child_s3(endpoint: str, job_json: str, outputs: str) -> None:
    """The processor, as a worker runs it, on the job's object in the moto server."""
    import pickle  # noqa: PLC0415

    import boto3  # noqa: PLC0415

    from filejobs.adapters.s3 import S3Outputs  # noqa: PLC0415
    from filejobs.domain.job import ProcessingJob  # noqa: PLC0415
    from filejobs.processors.base import Work  # noqa: PLC0415
    from filejobs.processors.compression import CompressionProcessor  # noqa: PLC0415

    s3 = boto3.client("s3", endpoint_url=endpoint)
    job = pickle.loads(bytes.fromhex(job_json))  # noqa: S301 (our own parent's job)
    assert isinstance(job, ProcessingJob)
    with tempfile.TemporaryDirectory() as workspace:
        work = Work(job, lambda: False, Path(workspace), S3Outputs(s3, outputs).for_job(job))
        print(json.dumps(CompressionProcessor(s3)(work)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def memory_of_the_processor(path: Path, size: int) -> tuple[float, dict[str, Any], float]:
    import pickle  # noqa: PLC0415

    import boto3  # noqa: PLC0415

    from filejobs.domain.content import sniff_content_type  # noqa: PLC0415
    from filejobs.domain.ingest import ObjectCreated, plan_ingest  # noqa: PLC0415
    from filejobs.domain.job import JobType  # noqa: PLC0415
    from filejobs.domain.time import utcnow  # noqa: PLC0415

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    server = subprocess.Popen(  # noqa: S603
        [str(Path(sys.executable).parent / "moto_server"), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint)
        for _ in range(100):
            try:
                s3.list_buckets()
                break
            except Exception:  # not up yet
                time.sleep(0.1)
        s3.create_bucket(Bucket="uploads")
        s3.put_bucket_versioning(Bucket="uploads", VersioningConfiguration={"Status": "Enabled"})
        s3.create_bucket(Bucket="outputs")
        key = "uploads/acme/big.csv"
        s3.upload_file(str(path), "uploads", key)
        head = s3.head_object(Bucket="uploads", Key=key)
        with path.open("rb") as source:
            sniffed = sniff_content_type(source.read(4096))
        record = ObjectCreated(
            bucket="uploads",
            key=key,
            size=size,
            etag=head["ETag"].strip('"'),
            version_id=head.get("VersionId"),
            sequencer=None,
        )
        plan = plan_ingest(record, sniffed, now=utcnow())
        job = next(j for j in plan.jobs if j.job_type is JobType.COMPRESSION)
        start = time.perf_counter()
        out, rss = peak_rss_mb(
            [sys.executable, __file__, "--child-s3", endpoint, pickle.dumps(job).hex(), "outputs"],
            env=env,
        )
        seconds = time.perf_counter() - start
        result = json.loads(out.splitlines()[-1])
        result["etag"] = s3.head_object(Bucket="outputs", Key=result["key"])["ETag"]
        return rss, result, seconds
    finally:
        server.terminate()
        server.wait()


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", "--mib", type=int, default=1024, help="MiB of CSV (1024)")
    parser.add_argument("--runs", type=int, default=5, help="samples per contender (5)")
    parser.add_argument("--child-local", nargs=2, type=Path)
    parser.add_argument("--child-s3", nargs=3)
    parser.add_argument("--skip-memory", action="store_true")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.runs < 1 or args.size_mb < 1:
        parser.error("--runs and --size-mb must be at least 1")
    return args


def main() -> None:
    args = arguments()
    if args.child_local:
        child_local(*args.child_local)
        return
    if args.child_s3:
        child_s3(*args.child_s3)
        return
    measured_at = utc_now()
    size = args.size_mb * MiB
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "object.csv"
        make_csv(path, size)
        digest = hashlib.sha256()
        for piece in file_chunks(path):
            digest.update(piece)
        original_sha = digest.hexdigest()
        baseline = ["zstd", "-3", "-q", "-f", "-o", os.devnull, str(path)]
        timed(baseline)  # warm the page cache
        samples = interleaved({"ours": ours(path), "baseline": baseline}, args.runs)
        ours_s = [sample.seconds for sample in samples["ours"]]
        base_s = [sample.seconds for sample in samples["baseline"]]
        # Sizes, and ours is a valid zstd stream of the same bytes (checked by the CLI).
        ours_file, cli_file = Path(scratch) / "ours.zst", Path(scratch) / "cli.zst"
        ours_bytes, ours_sha = timed(ours(path, str(ours_file))).stdout.split()
        timed(["zstd", "-3", "-q", "-f", "-o", str(cli_file), str(path)])
        restored = subprocess.run(  # noqa: S603
            ["zstd", "-d", "-q", "-c", str(ours_file)],  # noqa: S607
            check=True,
            capture_output=True,
        ).stdout
        assert hashlib.sha256(restored).hexdigest() == ours_sha == original_sha, "round trip"
        del restored
        cli_bytes = cli_file.stat().st_size
        ours_file.unlink()
        cli_file.unlink()
        memory = None if args.skip_memory else memory_of_the_processor(path, size)
    ours_rate = size / MiB / statistics.median(ours_s)
    base_rate = size / MiB / statistics.median(base_s)
    print(f"zstd level 3 of a {args.size_mb} MiB CSV-like file, median of {args.runs} runs")
    print(f"  ours (CompressionPass, 1 MiB chunks, + SHA-256): {ours_rate:7.1f} MiB/s", end="")
    print(f"  -> {int(ours_bytes) / size:.4f} of the size")
    print(f"  zstd -3 CLI:                                     {base_rate:7.1f} MiB/s", end="")
    print(f"  -> {cli_bytes / size:.4f} of the size")
    print(f"  ratio ours/zstd: {ours_rate / base_rate:.2f}x (target >= 0.8x)")
    if memory is not None:
        rss, result, seconds = memory
        print(f"processor on a {args.size_mb} MiB object in a moto server ({seconds:.1f} s):")
        print(f"  peak RSS {rss:.1f} MB (target < 100 MB)")
        print(
            f"  output {result['compressed_bytes']} bytes, ETag {result['etag']},"
            f" sha256 matches: {result['sha256'] == original_sha}"
        )
    speed = {
        "ours_mib_per_s": ours_rate,
        "zstd_mib_per_s": base_rate,
        "ours_size_fraction": int(ours_bytes) / size,
        "zstd_size_fraction": cli_bytes / size,
    }
    write_section(args.json, section(args.size_mb, speed, memory, measured_at))


def section(
    mib: int,
    speed: dict[str, float],
    memory: tuple[float, dict[str, Any], float] | None,
    measured_at: str,
) -> dict[str, Any]:
    """The Processors table's row from the median rates and the processor's memory run (None
    with --skip-memory)."""
    ours_rate, zstd_rate = speed["ours_mib_per_s"], speed["zstd_mib_per_s"]
    ratio = ours_rate / zstd_rate
    met = ratio >= TARGET_VS_ZSTD
    row: dict[str, Any] = {
        "what": "zstd_level_3",
        "mib": mib,
        "ours_mib_per_s": round(ours_rate, 1),
        "zstd_mib_per_s": round(zstd_rate, 1),
        "vs_zstd": round(ratio, 3),
        "ours_size_fraction": round(speed["ours_size_fraction"], 4),
        "zstd_size_fraction": round(speed["zstd_size_fraction"], 4),
        "processor_peak_mb": None,
        "processor_seconds": None,
        "upload_parts": None,
    }
    targets = [target("zstd level 3: our rate / zstd -3's", f">= {TARGET_VS_ZSTD}x", ratio, met)]
    goal = f">= {TARGET_VS_ZSTD}x: {verdict(met)}"
    peak = "not measured (--skip-memory)"
    if memory is not None:
        rss, result, seconds = memory
        # A multipart upload's ETag ends in -<parts>; a single PUT's has no dash.
        etag = str(result["etag"]).strip('"')
        parts = int(etag.rsplit("-", 1)[1]) if "-" in etag else 1
        row.update(
            processor_peak_mb=round(rss, 1),
            processor_seconds=round(seconds, 2),
            upload_parts=parts,
        )
        memory_met = rss < TARGET_PEAK_MB
        targets.append(
            target(
                f"compression processor peak RSS on {size_label(mib)}, S3 to S3 (MB)",
                f"< {TARGET_PEAK_MB}",
                rss,
                memory_met,
            )
        )
        goal += f"; peak < {TARGET_PEAK_MB} MB: {verdict(memory_met)}"
        uploaded = f"{parts} parts" if parts > 1 else "one PUT"
        peak = f"{rss:.0f} MB for the whole processor on {size_label(mib)}, S3 to S3 ({uploaded})"
    markdown = markdown_row(
        [
            f"zstd level 3 of {size_label(mib)} CSV-like data (SHA-256 in the same pass)",
            markdown_command(),
            f"{ours_rate:.1f} MiB/s",
            f"`zstd -3` {zstd_rate:.1f} MiB/s",
            f"{ratio:.2f}x",
            goal,
            peak,
        ]
    )
    return make_section("processors", [row], [markdown], targets, measured_at)


if __name__ == "__main__":
    main()
