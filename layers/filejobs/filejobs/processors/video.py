"""video_thumbnail: a video's poster frame, storyboard and animated preview, or an audio file's
waveform, with the media's vital statistics. This module is the processor: the demuxer chosen
for the sniffed type, the file downloaded or read by ranges, the decoder run in the sandbox, its
files written and the result made of its facts; and the sandbox's entry points (`decode_previews`,
`decode_poster`, `warm_up`), which the sandbox's zygote finds in this module by its name.

What each output shows and how its frames are found is in processors/video_previews.py (the
poster, the storyboard and its WebVTT index, the animation) and processors/audio_waveform.py
(an audio file's waveform, or a video file's with no moving picture, and the audio facts).

FFmpeg (PyAV) runs in the decoder sandbox (processors/sandbox), through `decode_previews`: it
never runs in the process that holds the function's credentials, reads the one descriptor it is
given with the one demuxer chosen for the sniffed type, and may answer only under the output
names of this module. A file up to MAX_VIDEO_BYTES is downloaded into the workspace first; a
larger one is never downloaded: the decoder reads the ranges it needs (the index at either end,
the packets it decodes) through the worker, over a socket (processors/ranged_source.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

import av
from PIL import Image

from filejobs.adapters.aws_errors import error_code, is_missing_object
from filejobs.domain.job import ProcessingJob
from filejobs.domain.job_options import OPTIONS, OptionError
from filejobs.domain.job_values import JobType
from filejobs.domain.objects import ObjectLocation
from filejobs.domain.retry import ObjectGoneError, PermanentError
from filejobs.processors.audio_waveform import Waveform, audio_facts, encode_png, extract_waveform
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.ranged_source import RangeServer, ReadRange, ranged_file
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
from filejobs.processors.video_previews import (
    CONTAINER_OPTIONS,
    NoMovingPictureError,
    Poster,
    Previews,
    encode_animation,
    encode_jpeg,
    encode_webp,
    extract_poster,
    extract_previews,
    sprite_of,
    storyboard_vtt,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Lambda's ephemeral storage budget for one video (the function's /tmp holds it whole); a larger
# one is read by ranges, never downloaded, up to MAX_RANGED_BYTES.
MAX_VIDEO_BYTES = 1_500_000_000
MAX_RANGED_BYTES = 100_000_000_000
# What one job may use in the sandbox: a decoded 8K frame and its scaled copies, FFmpeg's
# buffers, its frame threads and the libraries' own address space; CPU for decoding the frames
# of a storyboard (a minute of 1080p30 H.264 decoded whole: 4-6 CPU-seconds, bench/
# video_storyboard.py) or a long audio track, within the worker's 300 s with the download.
LIMITS: Final = DecoderLimits(memory_bytes=3072 * MiB, cpu_seconds=120, wall_seconds=180)

POSTER_NAME = "poster.webp"
SPRITE_NAME = "storyboard.jpg"
STORYBOARD_INDEX_NAME = "storyboard.vtt"
ANIMATION_NAME = "preview.webp"
WAVEFORM_NAME = "waveform.png"
# What the decoder may answer with, and what each is stored as.
OUTPUT_TYPES: Final[Mapping[str, str]] = {
    POSTER_NAME: "image/webp",
    SPRITE_NAME: "image/jpeg",
    STORYBOARD_INDEX_NAME: "text/vtt",
    ANIMATION_NAME: "image/webp",
    WAVEFORM_NAME: "image/png",
}

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
# Likewise for each audio type a waveform is drawn of (domain/content.py's AUDIO_TYPES).
AUDIO_DEMUXERS: Final[Mapping[str, str]] = {
    "audio/mpeg": "mp3",
    "audio/mp4": "mov",
    "audio/ogg": "ogg",
    "audio/flac": "flac",
    "audio/wav": "wav",
}

_EMPTY: Final = "the file is empty (0 bytes): no video to take a poster from"


# --- the processor ----------------------------------------------------------------------------


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
        demuxers = {**DEMUXERS, **AUDIO_DEMUXERS}
        demuxer = decoder_for(content_type, demuxers, job_type="video_thumbnail", empty=_EMPTY)
        options = {
            "demuxer": demuxer,
            "audio": content_type in AUDIO_DEMUXERS,
            **asked_previews(work.job.input_data),
        }
        size = source.size(work.job)
        if size == 0:
            raise PermanentError(_EMPTY)
        if size > self._max_bytes:
            decoded = self._decode_by_ranges(work, size, content_type, options)
        else:
            decoded = self._decode_downloaded(work, source, content_type, options)
        if work.should_stop():  # asked while the decoder finished: its files are not written
            raise StopRequested
        facts = decoded.result
        if "waveform" in facts:
            return _write_waveform(work, facts, decoded.outputs)
        return _write_video_previews(work, facts, decoded.outputs)

    def _decode_downloaded(
        self, work: Work, source: ObjectSource, content_type: str, options: dict[str, Any]
    ) -> Decoded:
        """The object downloaded into the workspace, then decoded from there: the fastest read
        for whatever the workspace holds. Progress: the download, in bytes, to half way."""
        local = downloaded(work, source, "media", max_bytes=self._max_bytes, until=0.5)
        size = local.stat().st_size
        if size == 0:
            raise PermanentError(_EMPTY)
        work.log(f"read {human_size(size)} {content_type} (demuxer {options['demuxer']})")
        decoded = self._decode(work, local, options)
        local.unlink()  # free the workspace before uploading
        return decoded

    def _decode_by_ranges(
        self, work: Work, size: int, content_type: str, options: dict[str, Any]
    ) -> Decoded:
        """An object larger than the workspace holds, never downloaded: the decoder reads the
        ranges it needs through the worker (processors/ranged_source.py)."""
        if size > MAX_RANGED_BYTES:
            raise PermanentError(
                f"the file is {human_size(size)}, larger than the "
                f"{human_size(MAX_RANGED_BYTES)} video_thumbnail reads"
            )
        work.log(
            f"reading {human_size(size)} {content_type} by ranges, larger than the "
            f"{human_size(self._max_bytes)} the workspace holds (demuxer {options['demuxer']})"
        )
        # The sandbox hands the decoder one file: an empty one, in place of the object.
        placeholder = work.workspace / "by-ranges"
        placeholder.touch()
        with RangeServer(_s3_ranges(self._s3, work.job), size) as server:
            try:
                decoded = self._decode(
                    work,
                    placeholder,
                    {**options, "ranged": size},
                    attachments=(server.decoder_end,),
                )
            except PermanentError:
                server.raise_failure()  # a read of the object failed: that is the error
                raise
        server.raise_failure()
        work.log(f"read {human_size(server.served)} of it in {server.reads} ranged reads")
        return decoded

    def _decode(
        self, work: Work, path: Path, options: dict[str, Any], attachments: tuple[int, ...] = ()
    ) -> Decoded:
        audio = options["audio"]
        work.report_progress(0.5, "decoding the audio" if audio else "decoding the poster frame")
        return self._sandbox.decode(
            decode_previews,
            path,
            options=options,
            limits=self._limits,
            should_stop=work.should_stop,
            output_allowed=OUTPUT_TYPES.__contains__,
            attachments=attachments,
        )


def asked_previews(input_data: Mapping[str, Any] | None) -> dict[str, bool]:
    """Which of a video's previews beyond its poster the job asks for (domain/job_options.py:
    `storyboard`, `animation`, both by default); a bad stored option fails the job for good."""
    try:
        chosen = OPTIONS[JobType.VIDEO_THUMBNAIL].read(input_data)
    except OptionError as error:
        raise PermanentError(f"bad option {error}") from None
    return {"storyboard": chosen["storyboard"], "animation": chosen["animation"]}


def _s3_ranges(s3: S3Client, job: ProcessingJob) -> ReadRange:
    """Ranged GETs of the job's object version, in the worker (for the RangeServer)."""
    location = ObjectLocation.of(job)

    def read(offset: int, length: int) -> bytes:
        request = {**location.request(), "Range": f"bytes={offset}-{offset + length - 1}"}
        try:
            data: bytes = s3.get_object(**request)["Body"].read()
        except Exception as error:
            if is_missing_object(error):
                raise ObjectGoneError(f"{location} is gone ({error_code(error)})") from error
            raise
        return data

    return read


_FACTS: Final = ("duration_s", "codec", "width", "height", "fps", "frame_time_s")


def _output(outputs: Mapping[str, bytes], name: str) -> bytes:
    data = outputs.get(name)
    if data is None:
        raise PermanentError(f"the decoder returned no {name}")
    return data


def _put(
    work: Work, outputs: Mapping[str, bytes], name: str, kind: str, facts: object
) -> dict[str, Any]:
    """Writes one of the decoder's files; its entry in the result: key, kind, format, bytes and
    the facts the decoder gave of it (dimensions, times)."""
    data = _output(outputs, name)
    key = work.outputs.put_bytes(name, data, OUTPUT_TYPES[name])
    extra = facts if isinstance(facts, dict) else {}
    return {"key": key, "kind": kind, "format": _format_of(name), "bytes": len(data), **extra}


def _format_of(name: str) -> str:
    return {"jpg": "jpeg"}.get(name.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1])


def _write_video_previews(
    work: Work, facts: Mapping[str, Any], outputs: Mapping[str, bytes]
) -> dict[str, Any]:
    work.log(_video_line(facts))
    work.report_progress(0.9, "writing the poster")
    poster_size = {"width": facts.get("poster_width"), "height": facts.get("poster_height")}
    result: dict[str, Any] = {
        **{name: facts.get(name) for name in _FACTS},
        "video": facts.get("video"),
        "poster": _put(work, outputs, POSTER_NAME, "poster", poster_size),
    }
    if facts.get("storyboard") is not None:
        result["storyboard"] = _put(work, outputs, SPRITE_NAME, "storyboard", facts["storyboard"])
        result["storyboard_index"] = _put(
            work, outputs, STORYBOARD_INDEX_NAME, "storyboard_index", None
        )
    if facts.get("animation") is not None:
        result["animation"] = _put(work, outputs, ANIMATION_NAME, "animation", facts["animation"])
    work.log(_wrote_line(result, ("poster", "storyboard", "storyboard_index", "animation")))
    return result


def _write_waveform(
    work: Work, facts: Mapping[str, Any], outputs: Mapping[str, bytes]
) -> dict[str, Any]:
    sound = facts.get("audio")
    sound = sound if isinstance(sound, dict) else {}
    work.log(_audio_line(sound))
    work.report_progress(0.9, "writing the waveform")
    result = {
        "duration_s": sound.get("duration_seconds"),
        "codec": sound.get("codec"),
        "audio": sound,
        "waveform": _put(work, outputs, WAVEFORM_NAME, "waveform", facts.get("waveform")),
    }
    work.log(_wrote_line(result, ("waveform",)))
    return result


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


def _audio_line(sound: Mapping[str, Any]) -> str:
    """What the decoder found: 'mp3float, 44100 Hz, 2 channels, 185.2 s'."""
    duration = sound.get("duration_seconds")
    line = f"{sound.get('codec')}, {sound.get('sample_rate')} Hz, {sound.get('channels')} channels"
    return line + (f", {duration:.1f} s" if isinstance(duration, int | float) else "")


def _wrote_line(result: Mapping[str, Any], fields: Sequence[str]) -> str:
    """'wrote K: 320x240 WebP, 3.1 KB; K2: 1600x180 JPEG, 20.0 KB; ...', the poster first."""
    parts = []
    for field in fields:
        entry = result.get(field)
        if not isinstance(entry, dict):
            continue
        size = f"{entry['width']}x{entry['height']} " if entry.get("width") else ""
        name = {"jpeg": "JPEG", "webp": "WebP", "png": "PNG", "vtt": "WebVTT"}[entry["format"]]
        parts.append(f"{entry['key']}: {size}{name}, {human_size(entry['bytes'])}")
    return "wrote " + "; ".join(parts)


# --- inside the sandbox -----------------------------------------------------------------------

# Two 64x64 H.264 frames: decoded once in the sandbox's zygote (warm_up).
_WARM_UP_CLIP: Final = Path(__file__).with_name("warm_up.mp4")


def warm_up() -> None:
    """In the sandbox's zygote, before the first job: the demuxer and the H.264 decoder run
    once, so the tables FFmpeg builds on first use are built here, not in every job's fresh
    process (a third of a short clip's poster time). Single-threaded (the decoder and the
    scaler told so): the zygote must stay single-threaded to fork safely."""
    with av.open(str(_WARM_UP_CLIP), format="mov", container_options=CONTAINER_OPTIONS) as clip:
        stream = clip.streams.video[0]
        stream.thread_type, stream.thread_count = "NONE", 1
        frame = next(iter(clip.decode(stream)), None)
        if frame is not None:  # scaled as a poster is, on this thread only
            frame.reformat(width=32, height=32, format="rgb24", threads=1).to_image()  # type: ignore[no-untyped-call]
    encode_webp(Image.new("RGB", (32, 24)))


def decode_poster(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task of the poster alone (bench/sandbox_overhead.py measures it): the
    poster of the open video, read with the demuxer the worker chose, as `poster.webp`."""
    poster = extract_poster(source, options["demuxer"])
    return Decoded(_poster_facts(poster), {POSTER_NAME: encode_webp(poster.image)})


def decode_previews(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: for a video, its poster, storyboard (sprite and WebVTT) and
    animation, and its facts; for audio (`options["audio"]`), or a video file with no moving
    picture but sound, its waveform and facts. With `options["ranged"]` (the object's size), the
    object is read by ranges through the first attachment, `source` being a placeholder."""
    demuxer = options["demuxer"]
    if options.get("ranged"):
        source = ranged_file(int(options["attachments"][0]), int(options["ranged"]))
    if options.get("audio"):
        return _waveform_answer(extract_waveform(source, demuxer))
    storyboard = options.get("storyboard") is not False
    animation = options.get("animation") is not False
    try:
        previews = extract_previews(source, demuxer, storyboard=storyboard, animation=animation)
    except NoMovingPictureError:
        source.seek(0)
        try:
            return _waveform_answer(extract_waveform(source, demuxer))
        except PermanentError:
            raise NoMovingPictureError("the file has no video stream, nor sound") from None
    return _previews_answer(previews)


def _poster_facts(poster: Poster) -> dict[str, Any]:
    return {
        "duration_s": None if poster.duration_s is None else round(poster.duration_s, 3),
        "codec": poster.codec,
        "width": poster.width,
        "height": poster.height,
        "fps": poster.fps,
        "frame_time_s": round(poster.frame_time_s, 3),
        "poster_width": poster.image.width,
        "poster_height": poster.image.height,
    }


def _previews_answer(previews: Previews) -> Decoded:
    poster, storyboard, animation = previews.poster, previews.storyboard, previews.animation
    facts = _poster_facts(poster)
    facts["video"] = {
        "duration_seconds": facts["duration_s"],
        "codec": poster.codec,
        "width": poster.width,
        "height": poster.height,
        "rotation": poster.rotation,
        "fps": poster.fps,
    }
    outputs = {POSTER_NAME: encode_webp(poster.image)}
    facts["storyboard"] = None
    if storyboard is not None:
        sprite = sprite_of(storyboard)
        tile_size = storyboard.tiles[0].size
        plan = storyboard.plan
        outputs[SPRITE_NAME] = encode_jpeg(sprite)
        outputs[STORYBOARD_INDEX_NAME] = storyboard_vtt(plan, tile_size, SPRITE_NAME).encode()
        facts["storyboard"] = {
            "width": sprite.width,
            "height": sprite.height,
            "tile_width": tile_size[0],
            "tile_height": tile_size[1],
            "columns": plan.columns,
            "rows": plan.rows,
            "interval_seconds": plan.interval_s,
            "tiles": plan.tiles,
        }
    facts["animation"] = None
    if animation is not None:
        outputs[ANIMATION_NAME] = encode_animation(animation.frames)
        facts["animation"] = {
            "width": animation.frames[0].width,
            "height": animation.frames[0].height,
            "start_seconds": round(animation.start_s, 3),
            "end_seconds": round(animation.end_s, 3),
        }
    return Decoded(facts, outputs)


def _waveform_answer(waveform: Waveform) -> Decoded:
    facts = {
        "audio": audio_facts(waveform),
        "waveform": {"width": waveform.image.width, "height": waveform.image.height},
    }
    return Decoded(facts, {WAVEFORM_NAME: encode_png(waveform.image)})
