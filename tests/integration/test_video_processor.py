"""video_thumbnail: a poster frame of a real uploaded video, as WebP, with its statistics.

Every input is made here: H.264 encoded with PyAV, each second of a clip painted its own colour
so a poster says which second it came from.
"""

from __future__ import annotations

import io
import math
import wave
from collections.abc import Callable
from pathlib import Path

import av
import pytest
from PIL import Image

from filejobs.domain.content import VIDEO_TYPES
from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors import video
from filejobs.processors.base import StopRequested
from filejobs.processors.video import DEMUXERS, VideoPosterProcessor
from filejobs.processors.video_previews import extract_poster, poster_time
from tests.processing import MediaBench

# One colour per second of a clip: far apart in RGB, so lossy coding cannot blur one into another.
PALETTE = (
    (255, 0, 0),
    (0, 255, 0),
    (0, 0, 255),
    (255, 255, 0),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
    (0, 0, 0),
)


def colour_of_second(second: int) -> tuple[int, int, int]:
    return PALETTE[second % len(PALETTE)]


def h264_video(
    seconds: float,
    fps: int = 10,
    size: tuple[int, int] = (320, 240),
    rotation: int | None = None,
    keyframe_every: int = 10,
    container: str = "mp4",
    paint: Callable[[int, int], Image.Image] | None = None,
    preset: str = "ultrafast",  # no B-frames; "medium" has them
) -> bytes:
    """An H.264 video whose frame n shows colour_of_second(n // fps) (or `paint(n, fps)`)."""
    out = io.BytesIO()
    with av.open(out, "w", format=container) as video:
        stream = video.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        stream.options = {"g": str(keyframe_every), "preset": preset}
        if rotation is not None:
            stream.set_display_rotation(rotation)
        for n in range(round(seconds * fps)):
            image = paint(n, fps) if paint else Image.new("RGB", size, colour_of_second(n // fps))
            frame = av.VideoFrame.from_image(image)  # type: ignore[no-untyped-call]
            for packet in stream.encode(frame):
                video.mux(packet)
        for packet in stream.encode():
            video.mux(packet)
    return out.getvalue()


def top_red_bottom_blue(n: int, fps: int) -> Image.Image:
    image = Image.new("RGB", (320, 240), (0, 0, 255))
    image.paste((255, 0, 0), (0, 0, 320, 120))
    return image


def wav_tone(seconds: float = 1.0, rate: int = 8000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(rate)
        samples = (round(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(rate))
        audio.writeframes(b"".join(s.to_bytes(2, "little", signed=True) for s in samples))
    return out.getvalue()


def audio_with_cover_art(path: Path) -> bytes:
    """An MP4 of silent AAC audio with a red JPEG cover (a video stream marked attached_pic)."""
    with av.open(str(path), "w", format="mp4") as song:
        audio = song.add_stream("aac", rate=8000)
        cover = song.add_stream("mjpeg")
        cover.width, cover.height, cover.pix_fmt = 64, 64, "yuvj420p"
        cover.disposition = av.stream.Disposition.attached_pic
        picture = av.VideoFrame.from_image(Image.new("RGB", (64, 64), (255, 0, 0)))  # type: ignore[no-untyped-call]
        for packet in [*cover.encode(picture.reformat(format="yuvj420p")), *cover.encode()]:
            packet.pts = packet.dts = 0
            song.mux(packet)
        silence = av.AudioFrame(format="fltp", layout="mono", samples=1024)
        silence.sample_rate = 8000
        for plane in silence.planes:
            plane.update(bytes(plane.buffer_size))
        for n in range(8):
            silence.pts = n * 1024
            for packet in audio.encode(silence):
                song.mux(packet)
        for packet in audio.encode():
            song.mux(packet)
    return path.read_bytes()


def png_image() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), "red").save(out, "PNG")
    return out.getvalue()


def near(pixel: object, expected: tuple[int, int, int], tolerance: int = 40) -> bool:
    """An RGB pixel within `tolerance` of `expected` on every channel (lossy coding drifts)."""
    assert isinstance(pixel, tuple)
    return all(abs(a - e) <= tolerance for a, e in zip(pixel, expected, strict=True))


def poster_of(media: MediaBench, result: dict[str, object]) -> Image.Image:
    poster = result["poster"]
    assert isinstance(poster, dict)
    image = Image.open(io.BytesIO(media.output(poster["key"])))
    assert image.format == "WEBP"
    return image.convert("RGB")


@pytest.mark.parametrize(
    ("seconds", "poster_second"),
    [
        (3, 0),  # 10% of 3 s: 0.3 s, in the first second
        (25, 2),  # 10% of 25 s: 2.5 s
        (70, 5),  # 10% would be 7 s: capped at 5 s
    ],
)
def test_the_poster_is_the_frame_at_a_tenth_of_the_duration_but_at_most_five_seconds_in(
    media: MediaBench, seconds: int, poster_second: int
) -> None:
    # Given an uploaded 320x240, 10 fps H.264 MP4 whose colour changes every second
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "clip.mp4", h264_video(seconds))

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the poster shows the second at 10% of the duration (at most 5 s in)
    expected_time = poster_time(float(seconds))
    assert result["frame_time_s"] == pytest.approx(expected_time, abs=0.1 + 1e-9)
    poster = poster_of(media, result)
    assert near(poster.getpixel((160, 120)), colour_of_second(poster_second))
    # And the result describes the video and the poster written
    assert result["duration_s"] == pytest.approx(seconds, abs=0.11)
    assert (result["codec"], result["width"], result["height"], result["fps"]) == (
        "h264",
        320,
        240,
        10.0,
    )
    assert result["poster"] == {
        "key": result["poster"]["key"],
        "kind": "poster",
        "format": "webp",
        "width": 320,
        "height": 240,
        "bytes": len(media.output(result["poster"]["key"])),
    }
    assert result["poster"]["key"].endswith("/video_thumbnail/poster.webp")


def test_a_keyframe_far_before_the_target_is_decoded_forward_to_the_target(
    media: MediaBench,
) -> None:
    # Given a 30 s clip with a keyframe only every 10 s: the poster time (3 s) falls between
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "sparse.mp4", h264_video(30, keyframe_every=100))

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the poster is the frame at 3 s, not the keyframe at 0 s
    assert result["frame_time_s"] == pytest.approx(3.0)
    assert near(poster_of(media, result).getpixel((160, 120)), colour_of_second(3))


def moving_bar(n: int, fps: int) -> Image.Image:
    image = Image.new("RGB", (320, 240), colour_of_second(n // fps))
    image.paste((255, 255, 255), (n * 7 % 300, 0, n * 7 % 300 + 20, 240))
    return image


def test_the_poster_is_exactly_the_frame_a_full_decode_shows_at_that_time(
    tmp_path: Path,
) -> None:
    # Given a clip with B-frames (frames nobody refers to are skipped on the way to the target)
    path = tmp_path / "bframes.mp4"
    path.write_bytes(h264_video(40, keyframe_every=50, preset="medium", paint=moving_bar))

    # When its poster is extracted (at 4 s)
    poster = extract_poster(path, DEMUXERS["video/mp4"])

    # Then it is the same picture as decoding every frame from the start up to 4 s
    with av.open(str(path)) as video:
        stream = video.streams.video[0]
        assert stream.codec_context.has_b_frames
        reference = next(
            frame
            for frame in video.decode(stream)
            if frame.pts is not None and frame.time is not None and frame.time >= 4.0
        )
        expected = reference.to_image()  # type: ignore[no-untyped-call]
    assert poster.frame_time_s == pytest.approx(4.0)
    assert poster.image.tobytes() == expected.tobytes()


@pytest.mark.parametrize(
    ("rotation", "top_left", "bottom_right"),
    [
        (90, (255, 0, 0), (0, 0, 255)),  # turned a quarter counter-clockwise: the top goes left
        (-90, (0, 0, 255), (255, 0, 0)),  # a quarter clockwise: the top goes right
        (180, (0, 0, 255), (255, 0, 0)),  # upside down
    ],
)
def test_the_poster_is_upright_as_a_player_shows_a_video_with_rotation_metadata(
    media: MediaBench,
    rotation: int,
    top_left: tuple[int, int, int],
    bottom_right: tuple[int, int, int],
) -> None:
    # Given 320x240 frames, top half red and bottom half blue, stored with a display rotation
    body = h264_video(1, rotation=rotation, paint=top_red_bottom_blue)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "phone.mp4", body)

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the video's size and the poster are as displayed (as `ffmpeg` would autorotate it)
    quarter_turn = rotation % 180 != 0
    display = (240, 320) if quarter_turn else (320, 240)
    assert (result["width"], result["height"]) == display
    poster = poster_of(media, result)
    assert poster.size == display
    assert near(poster.getpixel((10, 10)), top_left)
    assert near(poster.getpixel((poster.width - 10, poster.height - 10)), bottom_right)


def test_a_large_video_gets_a_poster_with_its_long_edge_capped(media: MediaBench) -> None:
    # Given a 1920x1080 video
    body = h264_video(0.5, size=(1920, 1080))
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "hd.mp4", body)

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the video is described at full size, the poster at 1280 px on its long edge
    assert (result["width"], result["height"]) == (1920, 1080)
    assert poster_of(media, result).size == (1280, 720)


def test_a_stream_that_does_not_know_its_duration_gets_its_first_frame(tmp_path: Path) -> None:
    # Given a raw H.264 elementary stream: no container, hence no duration
    raw = tmp_path / "clip.h264"
    raw.write_bytes(h264_video(3, container="h264"))

    # When its poster is extracted
    poster = extract_poster(raw, "h264")  # the core reads any demuxer it is given

    # Then it is the first frame
    assert poster.duration_s is None
    assert poster.frame_time_s == 0.0
    assert near(poster.image.getpixel((160, 120)), colour_of_second(0))


@pytest.mark.parametrize(
    ("name", "body", "labelled", "message"),
    [
        ("empty.mp4", lambda: b"", None, "the file is empty"),
        ("cut.mp4", lambda: h264_video(3)[:1500], None, "not a readable video"),
        ("still.png", png_image, None, "video_thumbnail does not decode image/png files"),
        ("noise.mp4", lambda: bytes(range(256)) * 64, None, "does not decode application/octet"),
        ("noise.mp4", lambda: bytes(range(256)) * 64, "video/mp4", "not a readable video"),
        ("tone.mp4", wav_tone, "video/mp4", "not a readable video"),
    ],
    ids=[
        "zero-bytes",
        "truncated-mp4",
        "image",
        "garbage",
        "garbage-labelled-mp4",
        "wav-labelled-mp4",
    ],
)
def test_input_that_is_no_decodable_video_fails_permanently_with_a_readable_message(
    media: MediaBench, name: str, body: Callable[[], bytes], labelled: str | None, message: str
) -> None:
    # Given an upload that is no decodable video (or a job that says it is one)
    label: dict[str, object] = {} if labelled is None else {"content_type": labelled}
    work = media.work_for(JobType.VIDEO_THUMBNAIL, name, body(), input_data=label)

    # When the processor runs, then it fails for good, saying why
    with pytest.raises(PermanentError, match=message):
        VideoPosterProcessor(media.s3)(work)


def test_an_mp4_whose_only_picture_is_its_cover_art_gets_a_waveform_not_a_poster(
    media: MediaBench, tmp_path: Path
) -> None:
    # Given an MP4 of audio whose only video stream is an attached cover picture
    body = audio_with_cover_art(tmp_path / "song.mp4")
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "song.mp4", body)

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then there is no moving picture to take frames of: it is drawn as the audio it is
    assert "poster" not in result
    assert result["waveform"]["kind"] == "waveform"
    assert result["audio"]["codec"] == "aac"


def test_a_video_larger_than_what_it_reads_by_ranges_fails_permanently_before_any_read(
    media: MediaBench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a video larger than the workspace's budget and than what is read by ranges
    body = h264_video(3)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "big.mp4", body)
    monkeypatch.setattr(video, "MAX_RANGED_BYTES", len(body) - 1)

    # When the processor runs, then it refuses it for good, saying so
    with pytest.raises(PermanentError, match=r"larger than the .* video_thumbnail reads"):
        VideoPosterProcessor(media.s3, max_bytes=len(body) // 2)(work)


def test_a_stop_request_while_decoding_stops_the_job(media: MediaBench) -> None:
    # Given a job whose stop signal turns on once the download is done
    checks: list[int] = []

    def stop_after_download() -> bool:
        checks.append(1)
        return len(checks) > 1  # the first check is the download's only chunk

    body = h264_video(25)
    work = media.work_for(
        JobType.VIDEO_THUMBNAIL, "clip.mp4", body, should_stop=stop_after_download
    )

    # When the processor runs, then it stops (the decoder killed if it is still running, its
    # answer dropped if it is not) and writes no poster
    with pytest.raises(StopRequested):
        VideoPosterProcessor(media.s3)(work)
    assert len(checks) >= 2
    listed = media.s3.list_objects_v2(Bucket=media.outputs)
    assert listed.get("KeyCount", 0) == 0


# --- one demuxer per type, reading the file it is given and nothing else -------------------------


def test_each_video_type_has_one_demuxer_ffmpeg_has() -> None:
    assert set(DEMUXERS) == VIDEO_TYPES
    for demuxer in set(DEMUXERS.values()):
        assert av.ContainerFormat(demuxer, "r").name  # raises on a name FFmpeg does not have
    assert not {"hls", "dash", "concat", "image2", "tee"} & set(DEMUXERS.values())


def test_a_script_naming_another_file_is_never_followed(tmp_path: Path) -> None:
    # Given an upload that is an FFmpeg concat script naming another file beside it in the
    # workspace, which FFmpeg left to probe would read instead
    (tmp_path / "other.mp4").write_bytes(h264_video(1))
    script = tmp_path / "video"
    script.write_text("ffconcat version 1.0\nfile other.mp4\n")
    with av.open(str(script)) as probed:
        assert probed.format.name == "concat"
        assert probed.streams.video
    # When a poster is taken of it as the MP4 it was labelled, then it is no video: the other
    # file was never opened
    with pytest.raises(PermanentError, match="not a readable video"):
        extract_poster(script, DEMUXERS["video/mp4"])


def test_frames_over_the_pixel_limit_are_refused_before_one_is_decoded(tmp_path: Path) -> None:
    # Given a 1920x1080 video (2.1 MP a frame) and a 1 MP limit
    path = tmp_path / "hd.mp4"
    path.write_bytes(h264_video(0.3, size=(1920, 1080)))

    # When / Then the poster is refused, saying what the video declares
    with pytest.raises(PermanentError, match=r"declares 1920x1080 frames \(2\.1 MP\), above the 1"):
        extract_poster(path, DEMUXERS["video/mp4"], max_pixels=1_000_000)
