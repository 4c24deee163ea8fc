"""video_thumbnail: one poster frame of a video, as WebP, with the video's vital statistics.

The poster is the frame shown at 10% of the duration, but at most 5 s in (past the black or
title frames a video usually opens with, without decoding far into a long one) and never past
the end. The decoder seeks to the keyframe before that time, then decodes forward to it. A
stream that does not know its duration gets its first frame.

FFmpeg runs in the decoder sandbox (processors/sandbox), through `decode_poster`: it never runs
in the process that holds the function's credentials. A video whose frames declare more than
MAX_VIDEO_PIXELS is refused before one frame is decoded.

The frame is turned upright as the player would show it (the display matrix: phones record
portrait video as landscape frames plus a rotation) and scaled to the display aspect ratio.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

import av
import av.error
import av.stream
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from PIL import Image

from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.sandbox.client import Sandbox, shared_sandbox
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Decoded
from filejobs.processors.source import (
    ObjectSource,
    content_type_of,
    decoder_for,
    downloaded,
    human_size,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Lambda's ephemeral storage budget for one video (the function's /tmp holds it whole).
MAX_VIDEO_BYTES = 1_500_000_000
# 8K UHD (7680x4320) is 33 MP: a frame declaring more is a bomb, not a video to decode.
MAX_VIDEO_PIXELS = 40_000_000
# What one poster may use in the sandbox: a decoded 8K frame and its scaled copy, FFmpeg's
# buffers and the libraries' own address space; CPU for the seek and the decode up to 5 s in.
LIMITS: Final = DecoderLimits(memory_bytes=3072 * MiB, cpu_seconds=60, wall_seconds=150)
POSTER_FRACTION = 0.10
POSTER_MAX_OFFSET_S = 5.0
POSTER_LONG_EDGE = 1280
WEBP_QUALITY = 80
WEBP_METHOD = 2  # libwebp effort 0-6: 2 is twice as fast as the default 4, for ~9% more bytes
POSTER_NAME = "poster.webp"

# The one FFmpeg demuxer for each video type a poster is taken of (domain/content.py's
# VIDEO_TYPES), named so that FFmpeg never probes: bytes sniffed as an MP4 never reach another
# demuxer, and none reaches those that follow references to other files or URLs (HLS, DASH,
# concat, image2 sequences).
DEMUXERS: Final[Mapping[str, str]] = {
    "video/mp4": "mov",
    "video/quicktime": "mov",
    "video/3gpp": "mov",
    "video/3gpp2": "mov",
    "video/webm": "matroska",
    "video/x-matroska": "matroska",
    "video/x-msvideo": "avi",
    "video/mp2t": "mpegts",
    "video/ogg": "ogg",
}
# The demuxer reads the local file it is given and nothing else: no network protocol, no other
# file by a reference inside this one.
_CONTAINER_OPTIONS: Final = {"protocol_whitelist": "file"}
_EMPTY: Final = "the file is empty (0 bytes): no video to take a poster from"

# What FFmpeg says about input that no retry will fix: it is not (or no longer) a video.
_BAD_INPUT = (
    av.error.InvalidDataError,
    av.error.DemuxerNotFoundError,
    av.error.DecoderNotFoundError,
    av.error.PatchWelcomeError,
    av.error.EOFError,
)


@dataclass(frozen=True)
class Poster:
    """The chosen frame, upright at display size (long edge capped), and what it came from."""

    image: Image.Image
    duration_s: float | None
    codec: str
    width: int  # of the video as displayed: after rotation and the sample aspect ratio
    height: int
    fps: float | None
    frame_time_s: float


def poster_time(duration_s: float | None) -> float:
    """Seconds into the video of the poster frame: 10% in, at most 5 s; 0 when unknown."""
    if duration_s is None or duration_s <= 0:
        return 0.0
    return min(duration_s * POSTER_FRACTION, POSTER_MAX_OFFSET_S)


def extract_poster(
    path: Path | BinaryIO,
    demuxer: str,
    should_stop: Callable[[], bool] = lambda: False,
    long_edge: int = POSTER_LONG_EDGE,
    max_pixels: int = MAX_VIDEO_PIXELS,
) -> Poster:
    """The poster frame of the video at `path` (a local file or an open one), read with
    `demuxer` alone; refused when its frames declare more than `max_pixels`.

    PermanentError when the file is no video FFmpeg can decode; StopRequested once told to stop.
    """
    try:
        with av.open(
            str(path) if isinstance(path, Path) else path,
            mode="r",
            format=demuxer,
            container_options=_CONTAINER_OPTIONS,
        ) as container:
            stream = _moving_picture(container)
            _check_pixels(stream, max_pixels)
            stream.thread_type = "SLICE"  # no frame-threading delay: we want one frame, soon
            duration_s = _duration_s(stream, container.duration)
            target_s = poster_time(duration_s)
            frame = _frame_at(container, stream, target_s, should_stop)
            display_w, display_h = _display_size(stream, frame)
            return Poster(
                image=_upright_image(stream, frame, long_edge),
                duration_s=duration_s,
                codec=stream.codec_context.name,
                width=display_w,
                height=display_h,
                fps=_fps(stream),
                frame_time_s=_seconds(frame, stream),
            )
    except _BAD_INPUT as error:
        raise PermanentError(f"not a readable video: {_reason(error)}") from error
    except av.error.MemoryError as error:
        # FFmpeg's ENOMEM on a small file is a table or box declaring a huge size (a corrupt
        # sample description did it): the same bytes fail the same way, so not transient.
        raise PermanentError(
            f"the video declares more memory than it may use (corrupt?): {_reason(error)}"
        ) from error


def _moving_picture(container: av.container.InputContainer) -> VideoStream:
    """The first video stream that moves: not a cover image attached to an audio track."""
    streams = container.streams.video
    moving = [s for s in streams if not s.disposition & av.stream.Disposition.attached_pic]
    if not moving:
        raise PermanentError("the file has no video stream")
    # A stream of an unknown codec (a corrupt sample description) has no codec context: it
    # was an AttributeError further on, retried as transient.
    if moving[0].codec_context is None:
        raise PermanentError("the video stream's codec is unknown: it cannot be decoded")
    return moving[0]


def _check_pixels(stream: VideoStream, max_pixels: int) -> None:
    width, height = stream.codec_context.width, stream.codec_context.height
    if width * height > max_pixels:
        raise PermanentError(
            f"the video declares {width}x{height} frames ({width * height / 1e6:.1f} MP), "
            f"above the {max_pixels / 1e6:.0f} MP this job accepts"
        )


def _reason(error: av.error.FFmpegError) -> str:
    return str(error.strerror or error).strip() or type(error).__name__


def _duration_s(stream: VideoStream, container_duration: int | None) -> float | None:
    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container_duration is not None and container_duration > 0:
        return container_duration / av.time_base
    return None


def _start_pts(stream: VideoStream) -> int:
    return stream.start_time if stream.start_time is not None else 0


def _seconds(frame: VideoFrame, stream: VideoStream) -> float:
    time_base = frame.time_base or stream.time_base
    if frame.pts is None or time_base is None:
        return 0.0
    return max(0.0, float((frame.pts - _start_pts(stream)) * time_base))


def _frames(
    container: av.container.InputContainer,
    stream: VideoStream,
    should_stop: Callable[[], bool],
    target_pts: int | None,
) -> Iterator[VideoFrame]:
    """Decoded frames from the current position; before `target_pts`, only those others need.

    A frame shown before the target that no other frame refers to is never looked at: the
    decoder skips it (about half the frames of a stream with B-frames). From the first packet
    at or after the target on (or one without a time), every frame is decoded.
    """
    context = stream.codec_context
    context.skip_frame = "NONREF" if target_pts is not None else "DEFAULT"
    for packet in container.demux(stream):
        if should_stop():
            raise StopRequested
        if context.skip_frame != "DEFAULT" and (
            target_pts is None or packet.pts is None or packet.pts >= target_pts
        ):
            context.skip_frame = "DEFAULT"
        yield from packet.decode()  # the final, empty packet flushes the decoder


def _frame_at(
    container: av.container.InputContainer,
    stream: VideoStream,
    target_s: float,
    should_stop: Callable[[], bool],
) -> VideoFrame:
    """The first frame at or after `target_s` (or the last one, if the stream ends before)."""
    time_base = stream.time_base
    target_pts = None
    if target_s > 0 and time_base is not None:
        target_pts = _start_pts(stream) + int(Fraction(target_s) / time_base)
        # To the keyframe at or before the target; the decoder then walks forward from it.
        # A stream with no index to seek by (an empty or corrupt sample table) makes FFmpeg say
        # EPERM, which was retried as transient: nothing was read yet, so decode from the start.
        with contextlib.suppress(av.error.FFmpegError):
            container.seek(target_pts, stream=stream, backward=True, any_frame=False)
    chosen: VideoFrame | None = None
    for frame in _frames(container, stream, should_stop, target_pts):
        chosen = frame
        if target_pts is None or frame.pts is None or frame.pts >= target_pts:
            break
    if chosen is None:
        raise PermanentError("the video stream has no decodable frame (truncated or corrupt)")
    return chosen


def _rotation(frame: VideoFrame) -> int:
    """Counter-clockwise degrees the frame must turn to show upright: 0, 90, 180 or 270."""
    return round(frame.rotation / 90) % 4 * 90


def _unrotated_size(stream: VideoStream, frame: VideoFrame) -> tuple[int, int]:
    """The frame's size at its display aspect ratio (non-square pixels stretched)."""
    width, aspect = frame.width, stream.sample_aspect_ratio
    if aspect is not None and aspect.numerator > 0 and aspect != 1:
        width = max(1, round(width * aspect))
    return width, frame.height


def _display_size(stream: VideoStream, frame: VideoFrame) -> tuple[int, int]:
    width, height = _unrotated_size(stream, frame)
    return (height, width) if _rotation(frame) in (90, 270) else (width, height)


def _upright_image(stream: VideoStream, frame: VideoFrame, long_edge: int) -> Image.Image:
    # Scale in swscale (one pass, fast), at the display aspect ratio, before turning upright.
    shown_w, shown_h = _unrotated_size(stream, frame)
    scale = min(1.0, long_edge / max(shown_w, shown_h))
    width, height = max(1, round(shown_w * scale)), max(1, round(shown_h * scale))
    rgb = frame.reformat(width=width, height=height, format="rgb24")
    image: Image.Image = rgb.to_image()  # type: ignore[no-untyped-call]  # PyAV's stub lacks it
    turn = {
        90: Image.Transpose.ROTATE_90,
        180: Image.Transpose.ROTATE_180,
        270: Image.Transpose.ROTATE_270,
    }.get(_rotation(frame))
    return image.transpose(turn) if turn is not None else image


def _fps(stream: VideoStream) -> float | None:
    rate = stream.average_rate or stream.guessed_rate
    return round(float(rate), 3) if rate else None


def encode_webp(image: Image.Image, quality: int = WEBP_QUALITY) -> bytes:
    out = io.BytesIO()
    image.save(out, format="WEBP", quality=quality, method=WEBP_METHOD)
    return out.getvalue()


class VideoPosterProcessor:
    def __init__(
        self,
        s3: S3Client,
        max_bytes: int = MAX_VIDEO_BYTES,
        *,
        sandbox: Sandbox | None = None,
        limits: DecoderLimits = LIMITS,
    ) -> None:
        self._s3 = s3
        self._max_bytes = max_bytes
        self._sandbox = sandbox or shared_sandbox(__name__)
        self._limits = limits

    def __call__(self, work: Work) -> dict[str, Any]:
        source = ObjectSource(self._s3)
        content_type = content_type_of(work.job, source)
        demuxer = decoder_for(content_type, DEMUXERS, job_type="video_thumbnail", empty=_EMPTY)
        # Progress: the download is most of a poster's time on a large video (the decoder seeks
        # to one keyframe and decodes forward to the poster's frame, at most 5 s in), measured
        # in bytes; then the decode and the upload, one step each.
        local = downloaded(work, source, "video", max_bytes=self._max_bytes, until=0.7)
        size = local.stat().st_size
        if size == 0:
            raise PermanentError(_EMPTY)
        work.log(f"read {human_size(size)} {content_type} (demuxer {demuxer})")
        work.report_progress(0.7, "decoding the poster frame")
        decoded = self._sandbox.decode(
            decode_poster,
            local,
            options={"demuxer": demuxer},
            limits=self._limits,
            should_stop=work.should_stop,
            output_allowed=POSTER_NAME.__eq__,
        )
        local.unlink()  # free the workspace before uploading
        if work.should_stop():  # asked while the decoder finished: its poster is not written
            raise StopRequested
        data = decoded.outputs.get(POSTER_NAME)
        if data is None:
            raise PermanentError(f"the decoder returned no {POSTER_NAME}")
        facts = decoded.result
        work.log(_video_line(facts))
        work.report_progress(0.9, "writing the poster")
        key = work.outputs.put_bytes(POSTER_NAME, data, "image/webp")
        work.log(
            f"wrote {key}: {facts.get('poster_width')}x{facts.get('poster_height')} WebP, "
            f"{human_size(len(data))}"
        )
        return {
            **{name: facts.get(name) for name in _FACTS},
            "poster": {
                "key": key,
                "width": facts.get("poster_width"),
                "height": facts.get("poster_height"),
                "bytes": len(data),
            },
        }


_FACTS: Final = ("duration_s", "codec", "width", "height", "fps", "frame_time_s")


def _video_line(facts: Mapping[str, Any]) -> str:
    """What the decoder found and chose: '1920x1080 h264, 31.4 s at 30 fps; poster at 3.1 s'."""
    duration, fps = facts.get("duration_s"), facts.get("fps")
    line = f"{facts.get('width')}x{facts.get('height')} {facts.get('codec')}"
    if isinstance(duration, int | float):
        line += f", {duration:.1f} s"
    if isinstance(fps, int | float):
        line += f" at {fps:g} fps"
    frame = facts.get("frame_time_s")
    if isinstance(frame, int | float):
        line += f"; poster frame at {frame:.2f} s"
    return line


# Two 64x64 H.264 frames: decoded once in the sandbox's zygote (warm_up).
_WARM_UP_CLIP: Final = Path(__file__).with_name("warm_up.mp4")


def warm_up() -> None:
    """In the sandbox's zygote, before the first job: the demuxer and the H.264 decoder run
    once, so the tables FFmpeg builds on first use are built here, not in every job's fresh
    process (a third of a short clip's poster time). Single-threaded (the decoder and the
    scaler told so): the zygote must stay single-threaded to fork safely."""
    with av.open(str(_WARM_UP_CLIP), format="mov", container_options=_CONTAINER_OPTIONS) as clip:
        stream = clip.streams.video[0]
        stream.thread_type, stream.thread_count = "NONE", 1
        frame = next(iter(clip.decode(stream)), None)
        if frame is not None:  # scaled as a poster is, on this thread only
            frame.reformat(width=32, height=32, format="rgb24", threads=1).to_image()  # type: ignore[no-untyped-call]
    encode_webp(Image.new("RGB", (32, 24)))


def decode_poster(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: the poster of the open video, read with the demuxer the worker
    chose, encoded as WebP (`poster.webp`), and the video's facts."""
    poster = extract_poster(source, options["demuxer"])
    facts = {
        "duration_s": None if poster.duration_s is None else round(poster.duration_s, 3),
        "codec": poster.codec,
        "width": poster.width,
        "height": poster.height,
        "fps": poster.fps,
        "frame_time_s": round(poster.frame_time_s, 3),
        "poster_width": poster.image.width,
        "poster_height": poster.image.height,
    }
    return Decoded(facts, {POSTER_NAME: encode_webp(poster.image)})
