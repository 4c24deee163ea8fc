"""What the image facts cost: thumbnails alone against the whole bundle, from a 24 MP JPEG.

A 6000x4000 JPEG (quality 90; gradients, shapes and sensor-like noise, as bench/thumbnails.py
makes them) carrying a camera's EXIF (with a GPS IFD), an XMP packet and an IPTC block is
written to a temp dir. Then, interleaved round by round so machine noise hits all alike:

- thumbnails: `render_thumbnails(path, (128, 256, 512), "webp")`, the default job without facts;
- bundle: `render_bundle(...)` with the same sizes: the thumbnails plus BlurHash, ThumbHash,
  palette, perceptual hash and the EXIF/IPTC/XMP facts, from the same decode;
- pyvips: the same three sizes as three `pyvips.Image.thumbnail` calls (shrink-on-load each),
  when `import pyvips` works (`make install` with the bench extra); else reported as skipped.

Medians per job are compared: bundle / thumbnails (target <= 1.3x), and pyvips / thumbnails
(thumbnails at least as fast as pyvips: >= 1.0x). The facts' own cost (pixel facts on the 128 px
rendition, metadata on the opened file) is printed beside, and the bundle's peak RSS in a fresh
interpreter that only runs it. With `--json PATH`, the figures are also written there as two
rows (bundle, pyvips) of the report's Processors table (bench/common.py). `--runs` is
`--rounds` by another name, as in the other benches.

    .venv/bin/python bench/image_bundle.py [--rounds 7] [--reps 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    add_json_argument,
    interleaved_calls,
    make_section,
    markdown_command,
    markdown_row,
    peak_rss_mb,
    target,
    utc_now,
    verdict,
    write_section,
)
from PIL import Image
from thumbnails import make_photo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

from filejobs.processors import image_facts  # noqa: E402
from filejobs.processors.thumbnail import (  # noqa: E402
    WEBP_QUALITY,
    render_bundle,
    render_thumbnails,
)

PHOTO = (6000, 4000)
SIZES = (128, 256, 512)
TARGET_BUNDLE = 1.3
TARGET_VS_PYVIPS = 1.0
THUMBNAILS, BUNDLE, PYVIPS = "thumbnails alone", "thumbnails + facts", "pyvips (3 sizes)"


def camera_metadata() -> tuple[Image.Exif, bytes, bytes]:
    """EXIF (camera, lens, time, orientation 1, GPS), an XMP packet, an IPTC APP13 segment."""
    exif = Image.Exif()
    exif.update({0x010F: "Canon", 0x0110: "Canon EOS R5", 0x0112: 1})
    exif.get_ifd(0x8769).update({0x9003: "2024:05:01 12:34:56", 0xA434: "RF24-105mm F4 L"})
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 29.6), 3: "E", 4: (2.0, 17.0, 40.2)})
    xmp = (
        b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
        b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
        b'xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmp:Rating="4"/></rdf:RDF></x:xmpmeta>'
    )
    iim = b"\x1c\x02\x19" + struct.pack(">H", 7) + b"harbour"
    resource = b"8BIM\x04\x04\x00\x00" + struct.pack(">I", len(iim)) + iim + b"\x00"
    payload = b"Photoshop 3.0\x00" + resource
    return exif, xmp, b"\xff\xed" + struct.pack(">H", len(payload) + 2) + payload


def make_camera_photo(path: Path) -> None:
    make_photo(path, PHOTO)
    exif, xmp, iptc = camera_metadata()
    with Image.open(path) as im:
        out = io.BytesIO()
        im.save(out, "JPEG", quality=90, exif=exif, xmp=xmp)
    data = out.getvalue()
    path.write_bytes(data[:2] + iptc + data[2:])


def thumbnails_alone(path: Path) -> None:
    render_thumbnails(path, SIZES, "webp")


def bundle(path: Path) -> None:
    facts = render_bundle(path, SIZES, "webp").facts
    assert facts["metadata"]["gps_present"] is True, facts


def pyvips_sizes() -> Callable[[Path], None] | None:
    try:
        import pyvips  # noqa: PLC0415 (optional: the bench extra)
    except (ImportError, OSError):
        return None

    def run(path: Path) -> None:
        for size in SIZES:
            pyvips.Image.thumbnail(str(path), size).webpsave_buffer(Q=WEBP_QUALITY)

    return run


def facts_alone(path: Path, rounds: int) -> tuple[float, float]:
    """Median ms of `pixel_facts` on the 128 px rendition and of `metadata_facts` on the
    opened (draft-decoded) file: what the bundle adds, measured apart."""
    rendition = render_thumbnails(path, (128,), "webp")[1][0].data
    small = Image.open(io.BytesIO(rendition)).convert("RGB")
    pixel, metadata = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        image_facts.pixel_facts(small)
        pixel.append(time.perf_counter() - started)
        with Image.open(path) as im:
            im.draft("RGB", (512, 512))
            im.load()
            started = time.perf_counter()
            image_facts.metadata_facts(im)
            metadata.append(time.perf_counter() - started)
    return statistics.median(pixel) * 1000, statistics.median(metadata) * 1000


def peak_mib_of_bundle(path: Path) -> float:
    """Peak RSS (MiB) of a fresh interpreter that imports our core and makes one bundle: the
    wrapper of `peak_rss_mb` forks it, so this process's 24 MP image is not counted."""
    code = (
        "import sys; from pathlib import Path\n"
        f"sys.path.insert(0, {str(ROOT / 'layers' / 'filejobs')!r})\n"
        "from filejobs.processors.thumbnail import render_bundle\n"
        f"render_bundle(Path({str(path)!r}), {SIZES!r}, 'webp')\n"
    )
    return peak_rss_mb([sys.executable, "-c", code])[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", "--runs", type=int, default=7, help="rounds (7)")
    parser.add_argument("--reps", type=int, default=3, help="calls per contestant per round (3)")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be at least 1")
    measured_at = utc_now()

    contestants: dict[str, Callable[[Path], None]] = {THUMBNAILS: thumbnails_alone, BUNDLE: bundle}
    vips = pyvips_sizes()
    if vips is not None:
        contestants[PYVIPS] = vips
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "camera.jpg"
        make_camera_photo(path)
        print(
            f"input: {PHOTO[0]}x{PHOTO[1]} JPEG q90 with EXIF, GPS, XMP and IPTC, "
            f"{path.stat().st_size / 1e6:.2f} MB; sizes {SIZES} as WebP; "
            f"{args.rounds} rounds x {args.reps} calls, interleaved; {os.cpu_count()} CPUs"
        )
        if vips is None:
            print("pyvips: skipped (import pyvips failed: the bench extra installs it)")
        samples = interleaved_calls(contestants, path, args.rounds, args.reps)
        pixel_ms, metadata_ms = facts_alone(path, args.rounds * args.reps)
        peak_mib = peak_mib_of_bundle(path)

    medians = {name: statistics.median(times) for name, times in samples.items()}
    base = medians[THUMBNAILS]
    print(f"{'':22} {'ms/job':>8} {'/ thumbnails':>13}")
    for name, seconds in medians.items():
        print(f"{name:22} {seconds * 1000:8.1f} {seconds / base:12.2f}x")
    print(
        f"the facts apart: pixels {pixel_ms:.1f} ms (on the 128 px rendition), "
        f"metadata {metadata_ms:.2f} ms"
    )
    ratio = medians[BUNDLE] / base
    verdicts = [f"bundle / thumbnails {ratio:.2f}x (target <= {TARGET_BUNDLE}x)"]
    if PYVIPS in medians:
        speed = medians[PYVIPS] / base
        verdicts.append(f"thumbnails vs pyvips {speed:.2f}x faster (target >= {TARGET_VS_PYVIPS}x)")
    print("; ".join(verdicts))
    print(f"peak RSS, one bundle in a fresh interpreter: {peak_mib:.0f} MiB")
    write_section(args.json, section(medians, pixel_ms, metadata_ms, peak_mib, measured_at))
    return 0


def section(
    medians: dict[str, float],
    pixel_ms: float,
    metadata_ms: float,
    peak_mib: float,
    measured_at: str,
) -> dict[str, Any]:
    """The Processors table's rows from the medians (seconds per job): the bundle against the
    thumbnails alone (<= 1.3x), and the thumbnails against pyvips (>= 1.0x) when it ran."""
    thumbs_s, bundle_s, vips_s = medians[THUMBNAILS], medians[BUNDLE], medians.get(PYVIPS)
    ratio = bundle_s / thumbs_s
    bundle_met = ratio <= TARGET_BUNDLE
    megapixels = PHOTO[0] * PHOTO[1] / 1e6
    sizes = ", ".join(str(size) for size in SIZES)
    targets = [
        target(
            f"image bundle ({megapixels:.0f} MP JPEG): its time over the thumbnails' alone",
            f"<= {TARGET_BUNDLE:g}x",
            ratio,
            bundle_met,
        )
    ]
    rows: list[dict[str, Any]] = [
        {
            "what": "image_bundle_24mp",
            "bundle_ms": round(bundle_s * 1000, 1),
            "thumbnails_ms": round(thumbs_s * 1000, 1),
            "bundle_vs_thumbnails": round(ratio, 3),
            "pixel_facts_ms": round(pixel_ms, 2),
            "metadata_facts_ms": round(metadata_ms, 2),
            "peak_mib": round(peak_mib, 1),
        }
    ]
    markdown_rows = [
        markdown_row(
            [
                f"image bundle of a {megapixels:.0f} MP JPEG ({PHOTO[0]}x{PHOTO[1]}, q90, EXIF,"
                f" GPS, XMP, IPTC): {sizes} px WebP + hashes, palette, metadata",
                markdown_command(),
                f"{bundle_s * 1000:.0f} ms per job",
                f"the thumbnails alone {thumbs_s * 1000:.0f} ms; the facts apart: pixels"
                f" {pixel_ms:.1f} ms, metadata {metadata_ms:.2f} ms",
                f"{ratio:.2f}x the time",
                f"<= {TARGET_BUNDLE:g}x the thumbnails: {verdict(bundle_met)}",
                f"{peak_mib:.0f} MiB",
            ]
        )
    ]
    if vips_s is None:
        markdown_rows.append(
            markdown_row(
                [
                    "same, the thumbnails alone",
                    "same",
                    f"{thumbs_s * 1000:.0f} ms per job",
                    "pyvips: not installed",
                    "",
                    f">= {TARGET_VS_PYVIPS:.1f}x pyvips: not measured",
                    "",
                ]
            )
        )
        return make_section("processors", rows, markdown_rows, targets, measured_at)
    speed = vips_s / thumbs_s
    vips_met = speed >= TARGET_VS_PYVIPS
    targets.append(
        target(
            f"image bundle's thumbnails ({sizes} px of a {megapixels:.0f} MP JPEG):"
            " speed-up over pyvips",
            f">= {TARGET_VS_PYVIPS:.1f}x",
            speed,
            vips_met,
        )
    )
    rows.append(
        {
            "what": "image_thumbnails_24mp_vs_pyvips",
            "thumbnails_ms": round(thumbs_s * 1000, 1),
            "pyvips_ms": round(vips_s * 1000, 1),
            "vs_pyvips": round(speed, 3),
        }
    )
    markdown_rows.append(
        markdown_row(
            [
                f"same, the thumbnails alone ({sizes} px from one decode)",
                "same",
                f"{thumbs_s * 1000:.0f} ms per job",
                f"pyvips `thumbnail`, once per size: {vips_s * 1000:.0f} ms",
                f"{speed:.2f}x pyvips",
                f">= {TARGET_VS_PYVIPS:.1f}x pyvips: {verdict(vips_met)}",
                "",
            ]
        )
    )
    return make_section("processors", rows, markdown_rows, targets, measured_at)


if __name__ == "__main__":
    sys.exit(main())
