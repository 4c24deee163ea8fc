"""thumbnail_generation's AVIF thumbnails and its `keep_metadata` option, on real images made
here with Pillow (a camera photo with EXIF, a GPS IFD, serial numbers, maker notes and XMP; an
Adobe RGB photo; a transparent badge), run by the processor in the decoder sandbox, as deployed.

Each test: given an upload and the job's options, when the processor runs, then the thumbnails
are what the options say (format, size, alpha) and carry the metadata they say, no more.
"""

from __future__ import annotations

import io
import struct

import pytest
from PIL import ExifTags, Image, ImageChops, ImageOps, ImageStat, features

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.thumbnail import ThumbnailProcessor
from tests.integration.test_image_facts import (
    adobe_rgb_icc,
    assert_clean_srgb,
    camera_exif,
    encoded,
    photo,
    run,
    xmp,
)
from tests.processing import MediaBench

SERIAL, LENS_SERIAL, OWNER = "123456789012", "LENS-998877", "Jane Roe"
MAKER_NOTE = b"Canon\x00internal serial 4455667788"
GPS_XMP = 'exif:GPSLatitude="48,51.49N" exif:GPSLongitude="2,17.67E"'


def camera_photo() -> bytes:
    """An 800x600 JPEG a camera held on its side wrote (orientation 6: shown 600x800), with
    everything a thumbnail must not leak: a GPS IFD, serial numbers, the owner's name, maker
    notes and an XMP packet with the position again."""
    exif = camera_exif(orientation=6, gps=True)
    exif[ExifTags.Base.CameraOwnerName] = OWNER
    details = exif.get_ifd(ExifTags.IFD.Exif)
    details[ExifTags.Base.LensSerialNumber] = LENS_SERIAL
    details[ExifTags.Base.MakerNote] = MAKER_NOTE
    details[ExifTags.Base.ExposureTime] = 0.004
    return encoded(photo(), "JPEG", quality=90, exif=exif, xmp=xmp("", GPS_XMP))


def badge() -> bytes:
    """A transparent 200x200 PNG with an opaque red square in the middle."""
    im = Image.new("RGBA", (200, 200), (0, 0, 0, 0))
    im.paste((255, 0, 0, 255), (50, 50, 150, 150))
    return encoded(im, "PNG")


def content_type(media: MediaBench, key: str) -> str:
    return media.s3.head_object(Bucket=media.outputs, Key=key)["ContentType"]


def decoded(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def nclx(avif: bytes) -> tuple[int, int, int, bool]:
    """The AVIF's colour box (ISO/IEC 23091-2 code points): primaries, transfer, matrix, full
    range. 1, 13 is sRGB (BT.709 primaries, the sRGB curve)."""
    at = avif.index(b"colrnclx") + 8
    primaries, transfer, matrix = struct.unpack(">HHH", avif[at : at + 6])
    return primaries, transfer, matrix, bool(avif[at + 6] & 0x80)


def mean_difference(a: Image.Image, b: Image.Image) -> float:
    diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
    return sum(ImageStat.Stat(diff).mean) / 3


# --- AVIF -------------------------------------------------------------------------------------


def test_pillow_here_writes_avif() -> None:
    # the layer pins the Pillow whose wheels carry libavif (layers/thumbnails/requirements.txt)
    assert features.check("avif")


def test_avif_thumbnails_are_upright_srgb_the_right_size_and_carry_no_metadata(
    media: MediaBench,
) -> None:
    # given the camera photo (800x600 stored, shown 600x800), when asked for AVIF thumbnails
    result, thumbnails = run(media, "IMG_0001.jpg", camera_photo(), format="avif", sizes=[128, 512])

    # then each is an AVIF named for its size, typed image/avif, listed with its facts
    entries = result["thumbnails"]
    assert [(t["size"], t["width"], t["height"]) for t in entries] == [
        (128, 96, 128),
        (512, 384, 512),
    ]
    for entry, data in zip(entries, thumbnails, strict=True):
        assert entry["key"].endswith(f"/thumb-{entry['size']}.avif")
        assert (entry["kind"], entry["format"], entry["bytes"]) == ("thumbnail", "avif", len(data))
        assert content_type(media, entry["key"]) == "image/avif"
        im = decoded(data)
        # which Pillow decodes to the size listed, upright, in sRGB with no EXIF, XMP or profile
        assert (im.format, im.size) == ("AVIF", (entry["width"], entry["height"]))
        assert ImageOps.exif_transpose(im).size == im.size
        assert_clean_srgb(data)
        assert nclx(data)[:2] == (1, 13)
        assert SERIAL.encode() not in data
    # and its pixels are the photo's, turned upright
    upright = Image.open(io.BytesIO(camera_photo())).rotate(-90, expand=True)
    assert mean_difference(decoded(thumbnails[1]), upright.resize((384, 512))) < 6


def test_an_adobe_rgb_photo_gives_an_avif_in_srgb_without_a_profile(media: MediaBench) -> None:
    # given a JPEG tagged Adobe RGB (1998): its pixels are converted to sRGB, and Pillow's AVIF
    # writer would copy the image's own ICC profile unless told there is none
    im = Image.new("RGB", (400, 200), (150, 60, 50))
    data = encoded(im, "JPEG", quality=95, icc_profile=adobe_rgb_icc())

    # when thumbnailed to AVIF, smaller and at its own size (the pixels not resized)
    _, thumbnails = run(media, "adobe.jpg", data, format="avif", sizes=[200, 400])

    # then neither carries a profile, and both say sRGB in their colour box
    for thumbnail in thumbnails:
        assert_clean_srgb(thumbnail)
        assert nclx(thumbnail)[:2] == (1, 13)


def test_an_avif_thumbnail_keeps_transparency(media: MediaBench) -> None:
    # given a transparent PNG with an opaque red square, when thumbnailed to AVIF
    result, [data] = run(media, "badge.png", badge(), format="avif", sizes=[100])

    # then the corners are transparent and the middle opaque red
    im = decoded(data)
    assert (im.mode, im.size, result["thumbnails"][0]["format"]) == ("RGBA", (100, 100), "avif")
    corner, middle = im.getpixel((2, 2)), im.getpixel((50, 50))
    assert isinstance(corner, tuple) and isinstance(middle, tuple)
    assert corner[3] == 0
    assert middle[3] == 255 and middle[0] >= 230 and max(middle[1:3]) <= 25


def test_a_format_the_definition_does_not_offer_is_refused_naming_the_field(
    media: MediaBench,
) -> None:
    data = encoded(photo((64, 48)), "PNG")
    for fmt in ("png", "AVIF"):
        work = media.work_for(JobType.THUMBNAIL_GENERATION, "ok.png", data, {"format": fmt})
        with pytest.raises(PermanentError) as raised:
            ThumbnailProcessor(media.s3)(work)
        assert str(raised.value) == (
            f"bad option input_data.format: must be one of webp, jpeg, avif; got '{fmt}'"
        )


# --- keep_metadata ----------------------------------------------------------------------------

FORMATS = ["webp", "jpeg", "avif"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_by_default_thumbnails_carry_no_metadata(media: MediaBench, fmt: str) -> None:
    for options in ({}, {"keep_metadata": False}):
        _, [data] = run(media, "IMG_0002.jpg", camera_photo(), format=fmt, sizes=[256], **options)
        assert_clean_srgb(data)


@pytest.mark.parametrize("fmt", FORMATS)
def test_kept_metadata_is_the_camera_s_exif_without_position_or_serials(
    media: MediaBench, fmt: str
) -> None:
    # given the camera photo, when asked to keep its metadata
    _, [data] = run(
        media, "IMG_0003.jpg", camera_photo(), format=fmt, sizes=[256], keep_metadata=True
    )

    # then the thumbnail's EXIF names the camera, the lens and the time, and its exposure
    im = decoded(data)
    exif = im.getexif()
    details = exif.get_ifd(ExifTags.IFD.Exif)
    assert (exif[ExifTags.Base.Make], exif[ExifTags.Base.Model]) == ("Canon", "Canon EOS R5")
    assert details[ExifTags.Base.DateTimeOriginal] == "2024:05:01 12:34:56"
    assert details[ExifTags.Base.LensModel] == "RF24-105mm F4 L IS USM"
    assert float(details[ExifTags.Base.ExposureTime]) == pytest.approx(0.004)
    # and a viewer that honours the orientation shows it as it is: upright already
    assert exif.get(ExifTags.Base.Orientation, 1) == 1
    assert im.size == (192, 256) and ImageOps.exif_transpose(im).size == (192, 256)
    # but no position, serial number, owner or maker notes, anywhere in the file
    assert ExifTags.IFD.GPSInfo not in exif and not exif.get_ifd(ExifTags.IFD.GPSInfo)
    for tag in (ExifTags.Base.BodySerialNumber, ExifTags.Base.CameraOwnerName):
        assert tag not in exif
    for tag in (ExifTags.Base.LensSerialNumber, ExifTags.Base.MakerNote):
        assert tag not in details
    for leaked in (SERIAL.encode(), LENS_SERIAL.encode(), OWNER.encode(), MAKER_NOTE):
        assert leaked not in data
    # and no XMP (which holds the position too) nor any ICC profile
    assert not {"xmp", "icc_profile"} & set(im.info)
    assert b"ns.adobe.com/xap" not in data and b"ICC_PROFILE" not in data


def test_exif_that_cannot_be_written_back_costs_its_metadata_never_the_thumbnails(
    media: MediaBench,
) -> None:
    # given a photo held on its side whose EXIF has its Make typed FLOAT instead of ASCII:
    # Pillow reads six floats, and cannot write them back as the text a Make is
    block = camera_exif(orientation=6, gps=True).tobytes()
    assert block.count(b"\x01\x0f\x00\x02") == 1  # big-endian entry: tag 0x010F, type 2
    hostile = block.replace(b"\x01\x0f\x00\x02", b"\x01\x0f\x00\x0b")
    data = encoded(photo((320, 240)), "JPEG", quality=90, exif=hostile)

    for options in ({}, {"keep_metadata": True}):
        # when thumbnailed, with its metadata or without
        result, [thumbnail] = run(media, "odd.jpg", data, sizes=[160], **options)

        # then the thumbnail is made, upright, and keeps nothing of a block it could not
        # rewrite whole
        entry = result["thumbnails"][0]
        assert (entry["width"], entry["height"]) == (120, 160)
        assert decoded(thumbnail).size == (120, 160)
        assert_clean_srgb(thumbnail)
