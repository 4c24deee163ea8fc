"""Real files of the formats image_sources.py reads, written on the spot by the formats' own
writers (psd-tools, tifffile's DNG tags for LibRaw in tools/samples.py, PyAV's encoders and
mutagen's tags): no
binaries in the repository. Each shows the same scene: red on the left half, blue on the right,
so a test can tell size, aspect, orientation and content from a thumbnail.
"""

from __future__ import annotations

import io
import sys
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
from av.audio.stream import AudioStream
from mutagen.flac import FLAC, Picture
from mutagen.id3 import APIC, ID3
from mutagen.mp4 import MP4, MP4Cover
from PIL import Image
from psd_tools import PSDImage
from psd_tools.constants import Compression

# tools/ is a folder of scripts, not a package: its modules import (and mypy checks them) by name.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import samples

RED, BLUE = (255, 0, 0), (0, 0, 255)


def scene(size: tuple[int, int] = (800, 600)) -> Image.Image:
    im = Image.new("RGB", size, BLUE)
    im.paste(RED, (0, 0, size[0] // 2, size[1]))
    return im


def jpeg(im: Image.Image) -> bytes:
    out = io.BytesIO()
    im.save(out, "JPEG", quality=90)
    return out.getvalue()


# --- SVG -------------------------------------------------------------------------------------


def svg(width: str = "800", height: str = "600", body: str = "", view_box: str = "") -> bytes:
    box = f' viewBox="{view_box}"' if view_box else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        f'width="{width}" height="{height}"{box}>'
        '<rect width="100%" height="100%" fill="#0000ff"/>'
        '<rect width="50%" height="100%" fill="#ff0000"/>'
        f"{body}</svg>"
    ).encode()


def billion_laughs_svg() -> bytes:
    entities = '<!ENTITY a "laugh">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9)
    )
    return (
        f'<?xml version="1.0"?><!DOCTYPE svg [{entities}]>'
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&j;</text></svg>'
    ).encode()


# --- Photoshop -------------------------------------------------------------------------------


def psd(im: Image.Image | None = None, *, version: int = 1) -> bytes:
    """A PSD (version 1) or PSB (version 2) whose merged composite is `im`, written by
    psd-tools. Raw (uncompressed) image data: its layout is the same in both versions."""
    document = PSDImage.frompil(im or scene(), compression=Compression.RAW)
    document._record.header.version = version  # PSB: psd-tools writes its 8-byte lengths
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def psd_without_composite() -> bytes:
    """A PSD whose version-info resource (1057) says hasRealMergedData is false, as Photoshop
    writes one saved without "Maximize compatibility"."""
    data = bytearray(psd())
    at = data.index(b"8BIM\x04\x21\x00\x00")  # its id, then an empty name (2 bytes)
    data[at + 8 + 4 + 4] = 0  # after the size (4) and the resource's version (4)
    return bytes(data)


# --- camera RAW ------------------------------------------------------------------------------


def dng(
    size: tuple[int, int] = (800, 600), *, orientation: int = 1, preview: bool = False
) -> bytes:
    """The scene as a DNG (tools/samples.py writes it: the demo has one too)."""
    return samples.dng(scene(size), orientation=orientation, preview=preview)


# --- audio with cover art ----------------------------------------------------------------------


def _audio(container: str, codec: str, rate: int = 44100) -> bytes:
    """Half a second of silence in `container`, encoded with `codec`."""
    out = io.BytesIO()
    with av.open(out, "w", format=container) as output:
        stream = cast("AudioStream", output.add_stream(codec, rate=rate))
        stream.layout = "mono"
        stream.time_base = Fraction(1, rate)
        samples = 1152 if codec == "libmp3lame" else 1024
        for number in range(rate // 2 // samples):
            frame = av.AudioFrame(format=stream.format.name, layout="mono", samples=samples)
            for plane in frame.planes:
                plane.update(bytes(plane.buffer_size))
            frame.sample_rate = rate
            frame.pts = number * samples
            for packet in stream.encode(frame):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    return out.getvalue()


def mp3(art: bytes | None = None) -> bytes:
    """An MP3 with an ID3v2 front cover (APIC) of `art`, or with no picture."""
    data = _audio("mp3", "libmp3lame")
    tags = ID3()
    if art is not None:
        tags.add(APIC(encoding=3, mime="image/jpeg", type=3, desc="Cover", data=art))
    out = io.BytesIO(data)
    tags.save(out)
    return out.getvalue()


def m4a(art: bytes | None) -> bytes:
    data = io.BytesIO(_audio("ipod", "aac"))
    tags = MP4(data)
    if art is not None:
        tags["covr"] = [MP4Cover(art, imageformat=MP4Cover.FORMAT_JPEG)]
    tags.save(data)
    return data.getvalue()


def flac(art: bytes | None) -> bytes:
    data = io.BytesIO(_audio("flac", "flac"))
    tags = FLAC(data)
    if art is not None:
        picture = Picture()
        picture.type, picture.mime, picture.data = 3, "image/png", art
        tags.add_picture(picture)
    data.seek(0)
    tags.save(data)
    return data.getvalue()
