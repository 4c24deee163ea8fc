"""A video's previews, decoded from its container: the poster frame, the storyboard's tiles and
the animation's frames, and their encoders (the WebP poster, the JPEG sprite with its WebVTT
index, the animated WebP). It runs in the decoder sandbox, called by the tasks of
processors/video.py, which names the files and writes them. The audio waveform
(processors/audio_waveform.py) shares its FFmpeg plumbing: a file opened with one demuxer,
FFmpeg's errors on input no retry fixes, damaged packets skipped, the stream's duration.

One pass over the video stream gives every frame the previews show:

- the poster (WebP): the frame at 10% of the duration, but at most 5 s in (past the black or
  title frames a video usually opens with, without decoding far into a long one);
- the storyboard: a JPEG sprite of up to 100 tiles, one per stretch of the video (a second, or
  a hundredth of a longer video), each the frame at the middle of its stretch, and a WebVTT
  file mapping each stretch to its tile as `storyboard.jpg#xywh=x,y,w,h`, what players such as
  video.js and Plyr read for the thumbnails above their seek bar. The cue names the sprite by
  its file name alone, so an app serves both from one place;
- the animation: 3 s at 10 fps from the poster's time (or the whole of a shorter video), as an
  animated WebP an <img> plays.

The frames are wanted in rising time order; the decoder seeks to the keyframe before a wanted
time only when a keyframe is known or likely to lie between where it is and that time (what
`ffmpeg -ss` before `-i` does for each), and otherwise decodes forward, skipping the frames no
other frame refers to. Past DECODE_BUDGET_PIXELS decoded, the remaining tiles are the keyframes
before their times. A stream that does not know its duration gets its first frame as poster, an
animation from its start, and no storyboard. A damaged packet is skipped, as FFmpeg's own tools
skip it, up to MAX_DAMAGED_PACKETS. A video whose frames declare more than MAX_VIDEO_PIXELS is
refused before one frame is decoded.

Frames are turned upright as the player would show them (the display matrix: phones record
portrait video as landscape frames plus a rotation) and scaled to the display aspect ratio.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO, Final

import av
import av.error
import av.stream
from av.audio.stream import AudioStream
from av.packet import Packet
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from PIL import Image

from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested

# 8K UHD (7680x4320) is 33 MP: a frame declaring more is a bomb, not a video to decode.
MAX_VIDEO_PIXELS = 40_000_000
POSTER_FRACTION = 0.10
POSTER_MAX_OFFSET_S = 5.0
POSTER_LONG_EDGE = 1280
WEBP_QUALITY = 80
WEBP_METHOD = 2  # libwebp effort 0-6: 2 is twice as fast as the default 4, for ~9% more bytes

# A storyboard: a tile per second, or per hundredth of a video longer than 100 s, ten a row.
STORYBOARD_MAX_TILES = 100
STORYBOARD_MIN_INTERVAL_S = 1.0
STORYBOARD_COLUMNS = 10
TILE_LONG_EDGE = 160  # a player's seek-bar thumbnail (YouTube's are 160x90)
SPRITE_QUALITY = 70
# The animation: a few seconds from the poster's time, small, at a rate that reads as motion.
ANIMATION_SECONDS = 3.0
ANIMATION_FPS = 10
ANIMATION_LONG_EDGE = 320
ANIMATION_QUALITY = 60
# Decoding forward is cheaper than seeking when no keyframe lies between here and the time
# wanted; before two keyframes have been seen, one is assumed within this many seconds.
SEEK_MIN_GAP_S = 5.0
# How much a storyboard may decode exactly (two minutes of 1080p at 30 fps, some 12 CPU-seconds)
# before its remaining tiles are keyframes: a 4K video with keyframes 10 s apart would otherwise
# decode most of its frames, past the CPU limit, and lose its poster with its storyboard.
DECODE_BUDGET_PIXELS = 120 * 30 * 1920 * 1080
# Damaged packets skipped before a file is taken for damage rather than media.
MAX_DAMAGED_PACKETS = 50

# The demuxer reads the local file it is given and nothing else: no network protocol, no other
# file by a reference inside this one.
CONTAINER_OPTIONS: Final = {"protocol_whitelist": "file"}

# What FFmpeg says about input that no retry will fix: it is not (or no longer) a video.
BAD_INPUT = (
    av.error.InvalidDataError,
    av.error.DemuxerNotFoundError,
    av.error.DecoderNotFoundError,
    av.error.PatchWelcomeError,
    av.error.EOFError,
)


class NoMovingPictureError(PermanentError):
    """The file has no video stream that moves (an audio file, or one with cover art only)."""


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
    rotation: int = 0  # counter-clockwise degrees of the display matrix, as ffprobe says


# --- which frames a video's previews show ------------------------------------------------------


def poster_time(duration_s: float | None) -> float:
    """Seconds into the video of the poster frame: 10% in, at most 5 s; 0 when unknown."""
    if duration_s is None or duration_s <= 0:
        return 0.0
    return min(duration_s * POSTER_FRACTION, POSTER_MAX_OFFSET_S)


@dataclass(frozen=True)
class StoryboardPlan:
    """The stretches of a video a storyboard's tiles stand for: `tiles` of `interval_s` each,
    the last one cut at the end of the video."""

    duration_s: float
    interval_s: float
    tiles: int

    @property
    def columns(self) -> int:
        return min(STORYBOARD_COLUMNS, self.tiles)

    @property
    def rows(self) -> int:
        return math.ceil(self.tiles / self.columns)

    def cue(self, index: int) -> tuple[float, float]:
        """Start and end seconds of tile `index`'s stretch."""
        start = index * self.interval_s
        return start, min(start + self.interval_s, self.duration_s)

    def tile_time(self, index: int) -> float:
        """The time of the frame tile `index` shows: the middle of its stretch (not its start,
        which for the first tile is the black frame many videos open with)."""
        start, end = self.cue(index)
        return (start + end) / 2


def storyboard_plan(duration_s: float | None) -> StoryboardPlan | None:
    """A tile per second, or per hundredth of a video longer than 100 s; none for a video
    whose duration is unknown."""
    if duration_s is None or duration_s <= 0:
        return None
    wanted = max(STORYBOARD_MIN_INTERVAL_S, duration_s / STORYBOARD_MAX_TILES)
    interval = math.ceil(wanted * 1000) / 1000  # whole milliseconds: what a WebVTT cue says
    tiles = min(STORYBOARD_MAX_TILES, max(1, math.ceil(duration_s / interval - 1e-9)))
    return StoryboardPlan(duration_s, interval, tiles)


def animation_times(duration_s: float | None) -> tuple[float, ...]:
    """The times of the animation's frames: ANIMATION_FPS a second for ANIMATION_SECONDS from
    the poster's time, moved earlier so that they end with the video; all of a shorter one."""
    length = ANIMATION_SECONDS
    start = poster_time(duration_s)
    if duration_s is not None and duration_s > 0:
        length = min(ANIMATION_SECONDS, duration_s)
        start = max(0.0, min(start, duration_s - length))
    count = max(1, math.floor(length * ANIMATION_FPS + 1e-6))
    return tuple(start + n / ANIMATION_FPS for n in range(count))


# --- walking a stream to the frames shown at given times --------------------------------------


def _start_pts(stream: VideoStream) -> int:
    return stream.start_time if stream.start_time is not None else 0


def _seconds(frame: VideoFrame, stream: VideoStream) -> float:
    time_base = frame.time_base or stream.time_base
    if frame.pts is None or time_base is None:
        return 0.0
    return max(0.0, float((frame.pts - _start_pts(stream)) * time_base))


class DamagedPackets:
    """Packets the decoder could not decode, skipped as FFmpeg's own tools skip them (a flipped
    bit in one frame of an hour loses that frame, not the job), up to MAX_DAMAGED_PACKETS: past
    them the file is more damage than media, and the job fails for good."""

    def __init__(self) -> None:
        self.packets = 0

    def decoded(self, packet: Packet[Any]) -> list[Any]:
        try:
            return packet.decode()
        except av.error.InvalidDataError as error:
            self.packets += 1
            if self.packets > MAX_DAMAGED_PACKETS:
                raise PermanentError(
                    f"more than {MAX_DAMAGED_PACKETS} damaged packets (corrupt?): "
                    f"{reason_of(error)}"
                ) from error
            return []


def _reached(frame: VideoFrame, target_pts: int | None) -> bool:
    return target_pts is None or frame.pts is None or frame.pts >= target_pts


class _Cursor:
    """One video stream, decoded forward to the frame shown at each of a rising series of times:
    the first frame at or after the time, or the last one if the stream ends before it.

    Before each time it seeks to the keyframe at or before it when a keyframe lies between the
    current frame and that time: known from the longest gap between keyframes seen so far, or
    assumed when the time is more than SEEK_MIN_GAP_S ahead. Otherwise it decodes forward; the
    frames shown before the time that no other frame refers to are never decoded (about half
    the frames of a stream with B-frames).

    Once it has decoded `budget_pixels` (None: no budget), it turns coarse: from then on only
    keyframes are decoded, and each time gets the keyframe at or before it (what it lands on
    after a seek), so a long, high-resolution video with keyframes far apart still gets its
    storyboard within the decoder's CPU limit, at a tile per keyframe at worst.
    """

    def __init__(
        self,
        container: av.container.InputContainer,
        stream: VideoStream,
        should_stop: Callable[[], bool],
        budget_pixels: int | None = None,
    ) -> None:
        self._container = container
        self._stream = stream
        self._should_stop = should_stop
        self._pixels_left = budget_pixels
        self._damage = DamagedPackets()
        self._landing = False  # coarse, just sought: the first frame decoded is the answer
        self._frames: Iterator[VideoFrame] | None = None
        self._frame: VideoFrame | None = None  # the last one decoded
        self._ended = False
        self._target_pts: int | None = None
        self._keyframe_gap_s = 0.0  # the longest stretch known to hold no keyframe
        self._last_keyframe_s: float | None = None
        self._sought_s: float | None = None  # the time of the last seek, until it lands

    def frame_at(self, target_s: float) -> VideoFrame:
        target_pts = self._pts(target_s)
        if self._frame is not None and _reached(self._frame, target_pts):
            return self._frame
        if self._frames is None or (not self._ended and self._worth_seeking(target_s)):
            self._start(target_s, target_pts)
        self._target_pts = target_pts
        frame = self._walk(target_pts)
        if frame is None and self.coarse and not self._ended:  # the budget ran out on the way
            self._start(target_s, target_pts)
            frame = self._walk(target_pts)
        if frame is not None:
            return frame
        if self._frame is None:
            raise PermanentError("the video stream has no decodable frame (truncated or corrupt)")
        return self._frame  # the stream ended before the target: its last frame

    def _walk(self, target_pts: int | None) -> VideoFrame | None:
        """Decodes on to the frame at `target_pts` (after a coarse seek, the one landed on);
        None if the stream ends first, or the budget runs out on the way."""
        assert self._frames is not None
        was_coarse = self.coarse
        for frame in self._frames:
            self._frame = frame
            if _reached(frame, target_pts) or self._landing:
                self._landing = False
                return frame
            if self.coarse and not was_coarse:
                return None
        self._ended = True
        return None

    def _pts(self, target_s: float) -> int | None:
        time_base = self._stream.time_base
        if target_s <= 0 or time_base is None:
            return None
        return _start_pts(self._stream) + int(Fraction(target_s) / time_base)

    @property
    def coarse(self) -> bool:
        """Whether the budget is spent: keyframes only from now on."""
        return self._pixels_left is not None and self._pixels_left <= 0

    def _worth_seeking(self, target_s: float) -> bool:
        if self._frame is None or self.coarse:
            return True
        ahead = target_s - _seconds(self._frame, self._stream)
        return ahead > max(SEEK_MIN_GAP_S, self._keyframe_gap_s)

    def _start(self, target_s: float, target_pts: int | None) -> None:
        if target_pts is not None:
            # To the keyframe at or before the target; decoding then walks forward from it.
            # A stream with no index to seek by (an empty or corrupt sample table) makes FFmpeg
            # say EPERM, which was retried as transient: decode from where it stands instead.
            with contextlib.suppress(av.error.FFmpegError):
                self._container.seek(target_pts, stream=self._stream, backward=True)
                self._sought_s, self._last_keyframe_s = target_s, None
                self._landing = self.coarse
        self._frames = self._decoded()

    def _decoded(self) -> Iterator[VideoFrame]:
        context = self._stream.codec_context
        for packet in self._container.demux(self._stream):
            if self._should_stop():
                raise StopRequested
            self._note_keyframe(packet)
            target = self._target_pts
            before_target = target is not None and packet.pts is not None and packet.pts < target
            context.skip_frame = (
                "NONKEY" if self.coarse else "NONREF" if before_target else "DEFAULT"
            )
            for frame in self._damage.decoded(packet):  # the last, empty one flushes
                if self._pixels_left is not None:
                    self._pixels_left -= frame.width * frame.height
                yield frame

    def _note_keyframe(self, packet: Packet[VideoStream]) -> None:
        """Learns how far apart keyframes are: the gap between two in a row, and, after a seek,
        the distance back from the time sought to the keyframe it landed on."""
        if not packet.is_keyframe or packet.pts is None or packet.time_base is None:
            return
        time_s = float((packet.pts - _start_pts(self._stream)) * packet.time_base)
        if self._sought_s is not None:
            self._keyframe_gap_s = max(self._keyframe_gap_s, self._sought_s - time_s)
            self._sought_s = None
        if self._last_keyframe_s is not None:
            self._keyframe_gap_s = max(self._keyframe_gap_s, time_s - self._last_keyframe_s)
        self._last_keyframe_s = time_s


# --- a video's previews -----------------------------------------------------------------------


@dataclass(frozen=True)
class Storyboard:
    plan: StoryboardPlan
    tiles: list[Image.Image]  # one per stretch, in order, all of one size


@dataclass(frozen=True)
class Animation:
    frames: list[Image.Image]
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Previews:
    poster: Poster
    storyboard: Storyboard | None  # None: not asked for, or a video too short for one
    animation: Animation | None  # None: not asked for


@contextlib.contextmanager
def ffmpeg_errors(what: str) -> Iterator[None]:
    """FFmpeg's errors on input no retry will fix, as PermanentErrors naming `what` was read
    ("video", "audio file")."""
    try:
        yield
    except BAD_INPUT as error:
        raise PermanentError(f"not a readable {what}: {reason_of(error)}") from error
    except av.error.MemoryError as error:
        # FFmpeg's ENOMEM on a small file is a table or box declaring a huge size (a corrupt
        # sample description did it): the same bytes fail the same way, so not transient.
        raise PermanentError(
            f"the {what} declares more memory than it may use (corrupt?): {reason_of(error)}"
        ) from error


def open_container(path: Path | BinaryIO, demuxer: str) -> av.container.InputContainer:
    """The file (a path or an open one) read with `demuxer` alone, FFmpeg never probing."""
    return av.open(
        str(path) if isinstance(path, Path) else path,
        mode="r",
        format=demuxer,
        container_options=CONTAINER_OPTIONS,
    )


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
    with ffmpeg_errors("video"), open_container(path, demuxer) as container:
        stream = _moving_picture(container)
        _check_pixels(stream, max_pixels)
        stream.thread_type = "SLICE"  # no frame-threading delay: we want one frame, soon
        duration_s = stream_duration_s(stream, container.duration)
        frame = _Cursor(container, stream, should_stop).frame_at(poster_time(duration_s))
        return _poster(stream, frame, duration_s, long_edge)


def extract_previews(
    path: Path | BinaryIO,
    demuxer: str,
    should_stop: Callable[[], bool] = lambda: False,
    max_pixels: int = MAX_VIDEO_PIXELS,
    budget_pixels: int = DECODE_BUDGET_PIXELS,
    *,
    storyboard: bool = True,
    animation: bool = True,
) -> Previews:
    """The poster and, as asked, the storyboard tiles and animation frames of the video at
    `path`, in one pass over its stream (see the module's docstring); errors as
    `extract_poster`'s."""
    with ffmpeg_errors("video"), open_container(path, demuxer) as container:
        stream = _moving_picture(container)
        _check_pixels(stream, max_pixels)
        # Frame threads: many frames are decoded, so throughput matters more than the delay.
        stream.thread_type = "AUTO"
        duration_s = stream_duration_s(stream, container.duration)
        plan = storyboard_plan(duration_s) if storyboard else None
        cursor = _Cursor(container, stream, should_stop, budget_pixels)
        pictures = _Pictures(stream, duration_s)
        for time_s, uses in _wanted_times(duration_s, plan, animation=animation):
            pictures.add(cursor.frame_at(time_s), uses)
        assert pictures.poster is not None  # the poster's time is always wanted
        moving = None
        if animation:
            times = animation_times(duration_s)
            moving = Animation(
                pictures.frames, times[0], times[0] + len(pictures.frames) / ANIMATION_FPS
            )
        return Previews(pictures.poster, Storyboard(plan, pictures.tiles) if plan else None, moving)


class _Pictures:
    """What the frames decoded become, as each is wanted: the poster, tiles, animation frames,
    all tiles (and all animation frames) of one size, the first frame's."""

    def __init__(self, stream: VideoStream, duration_s: float | None) -> None:
        self._stream = stream
        self._duration_s = duration_s
        self._sizes: dict[str, tuple[int, int]] = {}
        self.poster: Poster | None = None
        self.tiles: list[Image.Image] = []
        self.frames: list[Image.Image] = []

    def add(self, frame: VideoFrame, uses: Sequence[str]) -> None:
        if not self._sizes:
            self._sizes = {
                "tile": _scaled_size(self._stream, frame, TILE_LONG_EDGE),
                "animation": _scaled_size(self._stream, frame, ANIMATION_LONG_EDGE),
            }
        for use in uses:
            if use == "poster":
                self.poster = _poster(self._stream, frame, self._duration_s, POSTER_LONG_EDGE)
            elif use == "tile":
                self.tiles.append(_upright(frame, self._sizes["tile"]))
            else:
                self.frames.append(_upright(frame, self._sizes["animation"]))


def _wanted_times(
    duration_s: float | None, plan: StoryboardPlan | None, *, animation: bool = True
) -> list[tuple[float, list[str]]]:
    """Each time a frame is wanted at, in rising order, with what it is wanted for: "poster",
    "tile" (in the storyboard's order) or "animation" (in the animation's, when asked for)."""
    uses: dict[float, list[str]] = {}
    times = [(poster_time(duration_s), "poster")]
    times += [(plan.tile_time(i), "tile") for i in range(plan.tiles)] if plan else []
    times += [(t, "animation") for t in animation_times(duration_s)] if animation else []
    for time_s, use in times:
        uses.setdefault(round(time_s, 6), []).append(use)
    return sorted(uses.items())


def _poster(
    stream: VideoStream, frame: VideoFrame, duration_s: float | None, long_edge: int
) -> Poster:
    display_w, display_h = _display_size(stream, frame)
    return Poster(
        image=_upright(frame, _scaled_size(stream, frame, long_edge)),
        duration_s=duration_s,
        codec=stream.codec_context.name,
        width=display_w,
        height=display_h,
        fps=_fps(stream),
        frame_time_s=_seconds(frame, stream),
        rotation=_rotation(frame),
    )


def _moving_picture(container: av.container.InputContainer) -> VideoStream:
    """The first video stream that moves: not a cover image attached to an audio track."""
    streams = container.streams.video
    moving = [s for s in streams if not s.disposition & av.stream.Disposition.attached_pic]
    if not moving:
        raise NoMovingPictureError("the file has no video stream")
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


def reason_of(error: av.error.FFmpegError) -> str:
    """FFmpeg's own words for `error`, for a PermanentError's message."""
    return str(error.strerror or error).strip() or type(error).__name__


def stream_duration_s(
    stream: VideoStream | AudioStream, container_duration: int | None
) -> float | None:
    """The stream's duration in seconds, else the container's; None when neither knows it."""
    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container_duration is not None and container_duration > 0:
        return container_duration / av.time_base
    return None


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


def _scaled_size(stream: VideoStream, frame: VideoFrame, long_edge: int) -> tuple[int, int]:
    """The frame's display-aspect size, before turning upright, with its long edge at most
    `long_edge` (never enlarged)."""
    shown_w, shown_h = _unrotated_size(stream, frame)
    scale = min(1.0, long_edge / max(shown_w, shown_h))
    return max(1, round(shown_w * scale)), max(1, round(shown_h * scale))


_TURNS: Final = {
    90: Image.Transpose.ROTATE_90,
    180: Image.Transpose.ROTATE_180,
    270: Image.Transpose.ROTATE_270,
}


def _upright(frame: VideoFrame, size: tuple[int, int]) -> Image.Image:
    """The frame scaled to `size` (in swscale: one pass, fast), then turned upright."""
    rgb = frame.reformat(width=size[0], height=size[1], format="rgb24")
    image: Image.Image = rgb.to_image()  # type: ignore[no-untyped-call]  # PyAV's stub lacks it
    turn = _TURNS.get(_rotation(frame))
    return image.transpose(turn) if turn is not None else image


def _fps(stream: VideoStream) -> float | None:
    rate = stream.average_rate or stream.guessed_rate
    return round(float(rate), 3) if rate else None


# --- encoding ---------------------------------------------------------------------------------


def encode_webp(image: Image.Image, quality: int = WEBP_QUALITY) -> bytes:
    out = io.BytesIO()
    image.save(out, format="WEBP", quality=quality, method=WEBP_METHOD)
    return out.getvalue()


def encode_animation(frames: Sequence[Image.Image]) -> bytes:
    """An animated WebP, looping, each frame shown 1/ANIMATION_FPS s."""
    out = io.BytesIO()
    frames[0].save(
        out,
        format="WEBP",
        save_all=True,
        append_images=list(frames[1:]),
        duration=round(1000 / ANIMATION_FPS),
        loop=0,
        quality=ANIMATION_QUALITY,
        method=WEBP_METHOD,
    )
    return out.getvalue()


def sprite_of(storyboard: Storyboard) -> Image.Image:
    """The tiles in rows of `columns`, left to right, top to bottom."""
    tile_w, tile_h = storyboard.tiles[0].size
    plan = storyboard.plan
    sprite = Image.new("RGB", (plan.columns * tile_w, plan.rows * tile_h))
    for index, tile in enumerate(storyboard.tiles):
        row, column = divmod(index, plan.columns)
        sprite.paste(tile, (column * tile_w, row * tile_h))
    return sprite


def encode_jpeg(image: Image.Image, quality: int = SPRITE_QUALITY) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, optimize=True)
    return out.getvalue()


def _timestamp(seconds: float) -> str:
    """WebVTT's `hh:mm:ss.ttt`."""
    milliseconds = round(seconds * 1000)
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def storyboard_vtt(plan: StoryboardPlan, tile_size: tuple[int, int], sprite_name: str) -> str:
    """The WebVTT file mapping each stretch of the video to its tile in the sprite, named by its
    file name alone (relative: the app serves both from one place)."""
    tile_w, tile_h = tile_size
    lines = ["WEBVTT", ""]
    for index in range(plan.tiles):
        start, end = plan.cue(index)
        row, column = divmod(index, plan.columns)
        lines += [
            f"{_timestamp(start)} --> {_timestamp(end)}",
            f"{sprite_name}#xywh={column * tile_w},{row * tile_h},{tile_w},{tile_h}",
            "",
        ]
    return "\n".join(lines)
