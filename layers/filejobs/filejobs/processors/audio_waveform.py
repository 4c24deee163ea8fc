"""An audio file's waveform, and its audio facts: a PNG drawn by FFmpeg's `showwavespic` over the
first audio stream downmixed to mono at 8 kHz (enough for a picture, and the whole decoded track
kept by the filter stays small), and the track's duration as decoded, codec, sample rate and
channels. A video file with no moving picture but sound gets one too.

It runs in the decoder sandbox, called by processors/video.py's `decode_previews`, which names
the file and writes it. The file is opened, and its damaged packets skipped, as a video's
previews do it (processors/video_previews.py).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import av
import av.filter
from av.audio.stream import AudioStream
from av.video.frame import VideoFrame
from PIL import Image

from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested
from filejobs.processors.video_previews import (
    DamagedPackets,
    ffmpeg_errors,
    open_container,
    stream_duration_s,
)

# The waveform: a wide strip, drawn from the track downmixed to mono at a low rate.
WAVEFORM_WIDTH = 1200
WAVEFORM_HEIGHT = 240
WAVEFORM_SAMPLE_RATE = 8000
WAVEFORM_COLOUR = "0x2563eb"


@dataclass(frozen=True)
class Waveform:
    """The picture, and the facts of the track it was drawn from."""

    image: Image.Image
    duration_s: float
    codec: str
    sample_rate: int
    channels: int


def extract_waveform(
    path: Path | BinaryIO, demuxer: str, should_stop: Callable[[], bool] = lambda: False
) -> Waveform:
    """The waveform of the first audio stream of the file at `path`, read with `demuxer`
    alone, and its duration as decoded (not as the header claims, unless packets were damaged).

    PermanentError when the file is no audio FFmpeg can decode; StopRequested once told to stop.
    """
    with ffmpeg_errors("audio file"), open_container(path, demuxer) as container:
        stream = _sound(container)
        graph, sink = _waveform_graph(stream)
        header_s = stream_duration_s(stream, container.duration)
        damage, seconds = DamagedPackets(), 0.0
        for packet in container.demux(stream):
            if should_stop():
                raise StopRequested
            for frame in damage.decoded(packet):
                seconds += frame.samples / (frame.sample_rate or stream.codec_context.rate)
                graph.push(frame)
        if seconds <= 0:
            raise PermanentError("the audio stream has no decodable sound (truncated?)")
        graph.push(None)  # the end: showwavespic draws its one picture
        picture = sink.pull()
    context = stream.codec_context
    if damage.packets:  # what was skipped is missing from the sum: the header knows better
        seconds = header_s or seconds
    return Waveform(
        image=_rgba_image(picture),
        duration_s=seconds,
        codec=context.name,
        sample_rate=context.sample_rate,
        channels=context.channels,
    )


def _sound(container: av.container.InputContainer) -> AudioStream:
    streams = [s for s in container.streams.audio if s.codec_context is not None]
    if not streams:
        raise PermanentError("the file has no audio stream FFmpeg can decode")
    return streams[0]


def _waveform_graph(stream: AudioStream) -> tuple[av.filter.Graph, av.filter.FilterContext]:
    """abuffer -> mono 16-bit at WAVEFORM_SAMPLE_RATE -> showwavespic -> sink. showwavespic
    keeps every sample until the end: downmixed and resampled first, an hour is 58 MB."""
    graph = av.filter.Graph()
    source = graph.add_abuffer(template=stream)
    mono = graph.add(
        "aformat", f"sample_fmts=s16:sample_rates={WAVEFORM_SAMPLE_RATE}:channel_layouts=mono"
    )
    size = f"{WAVEFORM_WIDTH}x{WAVEFORM_HEIGHT}"
    draw = graph.add("showwavespic", f"s={size}:colors={WAVEFORM_COLOUR}:scale=sqrt")
    sink = graph.add("buffersink")
    source.link_to(mono)
    mono.link_to(draw)
    draw.link_to(sink)
    graph.configure()
    return graph, sink


def _rgba_image(frame: object) -> Image.Image:
    """showwavespic's picture with its transparent background kept (to_image drops alpha)."""
    if not isinstance(frame, VideoFrame):
        raise PermanentError("the waveform filter drew no picture")
    rgba = frame.reformat(format="rgba")
    stride = rgba.planes[0].line_size
    return Image.frombuffer(
        "RGBA", (rgba.width, rgba.height), bytes(rgba.planes[0]), "raw", "RGBA", stride, 1
    )


def encode_png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def audio_facts(waveform: Waveform) -> dict[str, Any]:
    """The result's `audio`: the track's duration as decoded, codec, sample rate and channels."""
    return {
        "duration_seconds": round(waveform.duration_s, 3),
        "codec": waveform.codec,
        "sample_rate": waveform.sample_rate,
        "channels": waveform.channels,
    }
