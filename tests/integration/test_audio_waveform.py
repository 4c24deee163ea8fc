"""video_thumbnail on audio: every audio type the sniffer gives gets the job, which draws the
file's waveform (PNG) and states its duration, codec, sample rate and channels. The audio is made
here with FFmpeg (PyAV): its `sine` source (and `anullsrc`'s silence) through each encoder.
"""

from __future__ import annotations

import io
import random
import wave
from collections.abc import Callable

import av
import pytest
from av.audio.stream import AudioStream
from PIL import Image

from filejobs.domain.content import AUDIO_TYPES, job_types_for, sniff_content_type
from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.audio_waveform import WAVEFORM_HEIGHT, WAVEFORM_WIDTH
from filejobs.processors.base import StopRequested
from filejobs.processors.video import AUDIO_DEMUXERS, VideoPosterProcessor
from tests.processing import MediaBench


def encoded(source: str, codec: str, container: str, rate: int, layout: str) -> bytes:
    """The lavfi `source` (FFmpeg's filter-graph syntax) encoded with `codec` in `container`."""
    out = io.BytesIO()
    with av.open(source, format="lavfi") as lavfi, av.open(out, "w", format=container) as song:
        stream = song.add_stream(codec, rate=rate, layout=layout)
        assert isinstance(stream, AudioStream)
        for frame in lavfi.decode(audio=0):
            frame.pts = None  # the encoder numbers them in its own time base
            for packet in stream.encode(frame):
                song.mux(packet)
        for packet in stream.encode():
            song.mux(packet)
    return out.getvalue()


def tone(
    codec: str,
    container: str,
    seconds: float = 4.0,
    rate: int = 44100,
    layout: str = "stereo",
) -> bytes:
    source = f"sine=frequency=440:sample_rate={rate}:duration={seconds},volume=4"
    return encoded(source, codec, container, rate, layout)


# (name, encoder, container, its sample rate, the type sniffed, the decoder FFmpeg names)
FORMATS = [
    ("song.mp3", "libmp3lame", "mp3", 44100, "audio/mpeg", "mp3float"),
    ("song.flac", "flac", "flac", 44100, "audio/flac", "flac"),
    ("song.wav", "pcm_s16le", "wav", 44100, "audio/wav", "pcm_s16le"),
    ("song.ogg", "libopus", "ogg", 48000, "audio/ogg", "opus"),
    ("song.m4a", "aac", "ipod", 44100, "audio/mp4", "aac"),  # ipod: the M4A brand
]


@pytest.mark.parametrize(
    ("name", "codec", "container", "rate", "sniffed", "decoder"),
    FORMATS,
    ids=[f[0] for f in FORMATS],
)
def test_an_audio_file_gets_a_waveform_of_the_stated_size_and_its_duration(
    media: MediaBench,
    name: str,
    codec: str,
    container: str,
    rate: int,
    sniffed: str,
    decoder: str,
) -> None:
    # Given a 4 s stereo tone in one of the audio formats ingest routes to video_thumbnail
    body = tone(codec, container, rate=rate)
    assert sniff_content_type(body[:4096]) == sniffed
    assert JobType.VIDEO_THUMBNAIL in job_types_for(sniffed)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, name, body)

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then it states what was decoded: the duration as decoded (lossy encoders pad a frame)
    audio = result["audio"]
    assert audio["duration_seconds"] == pytest.approx(4.0, abs=0.06)
    assert (audio["codec"], audio["sample_rate"], audio["channels"]) == (decoder, rate, 2)
    assert (result["duration_s"], result["codec"]) == (audio["duration_seconds"], decoder)
    # And the waveform is a PNG of the stated size, with no poster or frames
    waveform = result["waveform"]
    data = media.output(waveform["key"])
    assert waveform == {
        "key": waveform["key"],
        "kind": "waveform",
        "format": "png",
        "bytes": len(data),
        "width": WAVEFORM_WIDTH,
        "height": WAVEFORM_HEIGHT,
    }
    assert waveform["key"].endswith("/video_thumbnail/waveform.png")
    picture = Image.open(io.BytesIO(data))
    assert (picture.format, picture.size) == ("PNG", (WAVEFORM_WIDTH, WAVEFORM_HEIGHT))
    assert not {"poster", "storyboard", "animation"} & set(result)


def test_the_waveform_is_drawn_where_the_sound_is_and_left_clear_where_it_is_silent(
    media: MediaBench,
) -> None:
    # Given 2 s of silence, then 2 s of a loud tone
    silence_then_tone = (
        "anullsrc=r=44100:cl=mono:d=2[quiet];sine=f=440:r=44100:d=2,volume=8[loud];"
        "[quiet][loud]concat=v=0:a=1"
    )
    body = encoded(silence_then_tone, "flac", "flac", 44100, "mono")
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "half.flac", body)

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the left half of the picture is clear but for its centre line, the right half drawn
    # well above and below it
    picture = Image.open(io.BytesIO(media.output(result["waveform"]["key"]))).convert("RGBA")
    alpha = picture.getchannel("A").tobytes()  # row by row, a byte a pixel: 0 is clear

    def drawn_rows(x_from: int, x_to: int) -> int:
        rows = (alpha[y * WAVEFORM_WIDTH :][x_from:x_to] for y in range(WAVEFORM_HEIGHT))
        return sum(1 for row in rows if max(row) > 0)

    assert drawn_rows(20, 560) <= 3  # the zero line at most
    assert drawn_rows(640, 1180) > WAVEFORM_HEIGHT // 2
    assert result["audio"]["duration_seconds"] == pytest.approx(4.0, abs=0.01)


def test_every_audio_type_sniffed_has_one_demuxer_ffmpeg_has() -> None:
    assert set(AUDIO_DEMUXERS) == AUDIO_TYPES
    for demuxer in set(AUDIO_DEMUXERS.values()):
        assert av.ContainerFormat(demuxer, "r").name
    for audio_type in AUDIO_TYPES:  # routed there by ingest, scanned first like every file
        jobs = job_types_for(audio_type)
        assert JobType.VIDEO_THUMBNAIL in jobs
        assert jobs.index(JobType.VIRUS_SCAN) < jobs.index(JobType.VIDEO_THUMBNAIL)


def _flac_header_then_noise() -> bytes:
    return b"fLaC" + bytes(range(256)) * 32


def _truncated_flac() -> bytes:
    return tone("flac", "flac")[:200]


def _wav_without_samples() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as header_only:
        header_only.setnchannels(1)
        header_only.setsampwidth(2)
        header_only.setframerate(8000)
    return out.getvalue()


def _mp3_tag_then_nothing_decodable() -> bytes:
    return b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(4000)


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("noise.flac", _flac_header_then_noise, "not a readable audio file"),
        ("cut.flac", _truncated_flac, "not a readable audio file"),
        ("empty.mp3", _mp3_tag_then_nothing_decodable, "not a readable audio file"),
        ("silent.wav", _wav_without_samples, "the audio stream has no decodable sound"),
        ("zero.wav", lambda: b"", "the file is empty"),
    ],
    ids=["corrupt-flac", "truncated-flac", "mp3-without-frames", "no-samples", "zero-bytes"],
)
def test_a_corrupt_audio_file_fails_permanently_saying_so(
    media: MediaBench, name: str, body: Callable[[], bytes], message: str
) -> None:
    work = media.work_for(
        JobType.VIDEO_THUMBNAIL, name, body(), input_data={"content_type": _labelled(name)}
    )

    with pytest.raises(PermanentError, match=message):
        VideoPosterProcessor(media.s3)(work)
    assert media.s3.list_objects_v2(Bucket=media.outputs).get("KeyCount", 0) == 0


def _labelled(name: str) -> str:
    return {"flac": "audio/flac", "mp3": "audio/mpeg", "wav": "audio/wav"}[
        name.rsplit(".", maxsplit=1)[-1]
    ]


def test_a_cancelled_audio_job_stops_and_writes_no_waveform(media: MediaBench) -> None:
    # Given a job cancelled once its download is done
    checks: list[int] = []

    def cancelled_after_download() -> bool:
        checks.append(1)
        return len(checks) > 1

    body = tone("flac", "flac", seconds=30)
    work = media.work_for(
        JobType.VIDEO_THUMBNAIL, "long.flac", body, should_stop=cancelled_after_download
    )

    # When the processor runs, then it stops and writes nothing
    with pytest.raises(StopRequested):
        VideoPosterProcessor(media.s3)(work)
    assert media.s3.list_objects_v2(Bucket=media.outputs).get("KeyCount", 0) == 0


def test_audio_larger_than_the_workspace_holds_is_read_by_ranges_to_the_same_waveform(
    media: MediaBench,
) -> None:
    # Given a FLAC, a job that may download it and one whose workspace holds a tenth of it
    body = tone("flac", "flac", seconds=6)
    downloaded = media.work_for(JobType.VIDEO_THUMBNAIL, "song.flac", body)
    by_ranges = media.work_for(JobType.VIDEO_THUMBNAIL, "song.flac", body)

    # When both run
    expected = VideoPosterProcessor(media.s3)(downloaded)
    result = VideoPosterProcessor(media.s3, max_bytes=len(body) // 10)(by_ranges)

    # Then the second, read by ranges, states the same facts and draws the same waveform
    assert result["audio"] == expected["audio"]
    waveform, reference = result["waveform"], expected["waveform"]
    assert media.output(waveform["key"]) == media.output(reference["key"])


def flipped(data: bytes, flips: int, seed: int, within: float = 1.0) -> bytes:
    """`flips` bytes inverted from a quarter into `data` (its header kept) up to `within` of
    its length."""
    out = bytearray(data)
    chosen = random.Random(seed)
    for _ in range(flips):
        out[chosen.randrange(len(out) // 4, int(len(out) * within))] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize(
    ("name", "codec", "container"),
    [("song.flac", "flac", "flac"), ("song.m4a", "aac", "ipod")],
)
def test_a_few_damaged_packets_are_skipped_and_the_waveform_drawn(
    media: MediaBench, name: str, codec: str, container: str
) -> None:
    # Given a 3 s tone with 20 bytes of its packets inverted
    body = flipped(tone(codec, container, seconds=3), flips=20, seed=1)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, name, body)

    # When the processor runs, then it draws the waveform of what decodes, as FFmpeg's tools
    # would, and states the duration the file's header gives
    result = VideoPosterProcessor(media.s3)(work)
    assert result["waveform"]["width"] == WAVEFORM_WIDTH
    assert result["audio"]["duration_seconds"] == pytest.approx(3.0, abs=0.1)
