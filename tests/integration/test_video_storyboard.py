"""video_thumbnail's storyboard (a JPEG sprite and the WebVTT file players read), its animated
preview and the video's facts, on real H.264 made here with FFmpeg's encoder (PyAV): each
second of a clip painted its own colour, so a tile or a frame says which second it came from.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import av
import pytest
from PIL import Image

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested
from filejobs.processors.video import DEMUXERS, VideoPosterProcessor
from filejobs.processors.video_previews import extract_previews, storyboard_plan, storyboard_vtt
from tests.integration.test_audio_waveform import flipped
from tests.integration.test_video_processor import (
    colour_of_second,
    h264_video,
    moving_bar,
    near,
    top_red_bottom_blue,
)
from tests.processing import MediaBench

MP4 = DEMUXERS["video/mp4"]


def image_of(media: MediaBench, entry: dict[str, object], image_format: str) -> Image.Image:
    key = entry["key"]
    assert isinstance(key, str)
    image = Image.open(io.BytesIO(media.output(key)))
    assert image.format == image_format
    return image


def cues_of(vtt: str) -> list[tuple[float, float, str, tuple[int, int, int, int]]]:
    """A WebVTT storyboard's cues: start and end seconds, the image's name, its x, y, w, h."""
    assert vtt.startswith("WEBVTT\n\n")
    cues = []
    for block in vtt.split("\n\n")[1:]:
        if not block.strip():
            continue
        timing, target = block.strip().split("\n")
        start, end = (_seconds(stamp) for stamp in timing.split(" --> "))
        name, _, fragment = target.partition("#xywh=")
        x, y, w, h = (int(n) for n in fragment.split(","))
        cues.append((start, end, name, (x, y, w, h)))
    return cues


def _seconds(stamp: str) -> float:
    match = re.fullmatch(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})", stamp)
    assert match, stamp
    hours, minutes, seconds, milliseconds = (int(g) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds + milliseconds / 1000


def animation_frames(image: Image.Image) -> list[tuple[Image.Image, int]]:
    """Each frame of an animated image (RGB) and how long it shows, in milliseconds (the
    encoder merges identical frames in a row into one shown longer)."""
    frames = []
    for index in range(getattr(image, "n_frames", 1)):
        image.seek(index)
        frames.append((image.convert("RGB"), int(image.info["duration"])))
    return frames


def test_a_20_second_video_gets_a_storyboard_of_20_tiles_a_webvtt_index_and_a_3_second_loop(
    media: MediaBench,
) -> None:
    # Given a 20 s, 320x240, 10 fps H.264 MP4 whose colour changes every second
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "clip.mp4", h264_video(20))

    # When the processor runs (the decoder in its sandbox)
    result = VideoPosterProcessor(media.s3)(work)

    # Then the video's facts are stated
    assert result["video"] == {
        "duration_seconds": 20.0,
        "codec": "h264",
        "width": 320,
        "height": 240,
        "rotation": 0,
        "fps": 10.0,
    }
    # And the sprite holds 20 tiles of 160x120, ten a row, each the colour of its second
    storyboard = result["storyboard"]
    sprite = image_of(media, storyboard, "JPEG")
    assert storyboard == {
        "key": storyboard["key"],
        "kind": "storyboard",
        "format": "jpeg",
        "bytes": len(media.output(storyboard["key"])),
        "width": 1600,
        "height": 240,
        "tile_width": 160,
        "tile_height": 120,
        "columns": 10,
        "rows": 2,
        "interval_seconds": 1.0,
        "tiles": 20,
    }
    assert sprite.size == (1600, 240)
    for second in range(20):
        row, column = divmod(second, 10)
        centre = (column * 160 + 80, row * 120 + 60)
        assert near(sprite.convert("RGB").getpixel(centre), colour_of_second(second)), second
    # And the index maps each second, back to back from 0 to 20 s, to its tile in the sprite,
    # named by the sprite's file name beside it
    index = result["storyboard_index"]
    vtt = media.output(index["key"]).decode()
    assert index == {
        "key": storyboard["key"].removesuffix(".jpg") + ".vtt",
        "kind": "storyboard_index",
        "format": "vtt",
        "bytes": len(vtt.encode()),
    }
    cues = cues_of(vtt)
    assert len(cues) == 20
    assert cues[0][0] == 0.0 and cues[-1][1] == 20.0
    assert all(cues[i][1] == cues[i + 1][0] for i in range(19))
    sprite_name = storyboard["key"].rsplit("/", 1)[-1]
    for second, (start, end, name, (x, y, w, h)) in enumerate(cues):
        assert (start, end) == (second, second + 1)
        assert name == sprite_name == "storyboard.jpg"
        assert (w, h) == (160, 120)
        assert 0 <= x <= sprite.width - w and 0 <= y <= sprite.height - h
        assert near(
            sprite.convert("RGB").getpixel((x + w // 2, y + h // 2)), colour_of_second(second)
        )
    # And the animation is 3 s from the poster's time (2 s): 30 frames of 100 ms
    animation = result["animation"]
    loop = image_of(media, animation, "WEBP")
    assert animation == {
        "key": animation["key"],
        "kind": "animation",
        "format": "webp",
        "bytes": len(media.output(animation["key"])),
        "width": 320,
        "height": 240,
        "start_seconds": 2.0,
        "end_seconds": 5.0,
    }
    frames = animation_frames(loop)
    assert sum(ms for _, ms in frames) == 3000
    assert loop.info.get("loop") == 0  # forever
    shown_from = 0
    for frame, ms in frames:  # each frame the colour of the second it shows
        assert frame.size == (320, 240)
        assert near(frame.getpixel((160, 120)), colour_of_second(2 + shown_from // 1000))
        shown_from += ms
    # And the poster is kept as it was, now typed
    poster = result["poster"]
    assert poster == {
        "key": poster["key"],
        "kind": "poster",
        "format": "webp",
        "bytes": len(media.output(poster["key"])),
        "width": 320,
        "height": 240,
    }
    assert (result["duration_s"], result["frame_time_s"]) == (20.0, 2.0)


def test_a_one_second_video_gets_one_tile_and_an_animation_of_all_of_it(media: MediaBench) -> None:
    # Given a 1 s video made from FFmpeg's test pattern
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "short.mp4", pattern_video(seconds=1))

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the storyboard is one tile, indexed from 0 to 1 s
    storyboard = result["storyboard"]
    assert (storyboard["tiles"], storyboard["columns"], storyboard["rows"]) == (1, 1, 1)
    assert image_of(media, storyboard, "JPEG").size == (160, 120)
    cues = cues_of(media.output(result["storyboard_index"]["key"]).decode())
    assert cues == [(0.0, 1.0, "storyboard.jpg", (0, 0, 160, 120))]
    # And the animation is the whole video: 10 frames from 0 to 1 s
    animation = result["animation"]
    assert (animation["start_seconds"], animation["end_seconds"]) == (0.0, 1.0)
    frames = animation_frames(image_of(media, animation, "WEBP"))
    assert len(frames) == 10 and sum(ms for _, ms in frames) == 1000  # the pattern moves


@pytest.mark.parametrize(
    ("options", "written"),
    [
        ({"storyboard": False, "animation": False}, {"poster"}),
        ({"storyboard": False}, {"poster", "animation"}),
        ({"animation": False}, {"poster", "storyboard", "storyboard_index"}),
        ({}, {"poster", "storyboard", "storyboard_index", "animation"}),
    ],
)
def test_a_job_gets_the_previews_its_options_ask_for(
    media: MediaBench, options: dict[str, object], written: set[str]
) -> None:
    # Given a 3 s video, and a job asking for some of its previews (a preset's, say)
    clip = pattern_video(seconds=3)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "clip.mp4", clip, input_data=options)
    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)
    # Then it wrote those, and only those
    made = {
        name for name in ("poster", "storyboard", "storyboard_index", "animation") if name in result
    }
    assert made == written
    listed = media.s3.list_objects_v2(Bucket=media.outputs)["KeyCount"]
    assert listed == len(written)


def test_a_previews_option_that_is_not_true_or_false_fails_the_job_for_good(
    media: MediaBench,
) -> None:
    work = media.work_for(
        JobType.VIDEO_THUMBNAIL,
        "clip.mp4",
        pattern_video(seconds=1),
        input_data={"animation": "no"},
    )
    with pytest.raises(PermanentError, match=r"input_data\.animation: must be true or false"):
        VideoPosterProcessor(media.s3)(work)


def pattern_video(seconds: float, size: str = "320x240", fps: int = 25) -> bytes:
    """FFmpeg's `testsrc` pattern, H.264 in MP4."""
    out = io.BytesIO()
    pattern = f"testsrc=duration={seconds}:size={size}:rate={fps}"
    with av.open(pattern, format="lavfi") as source, av.open(out, "w", format="mp4") as video:
        stream = video.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = (*map(int, size.split("x")), "yuv420p")
        for frame in source.decode(video=0):
            frame.pts = None
            for packet in stream.encode(frame.reformat(format="yuv420p")):
                video.mux(packet)
        for packet in stream.encode():
            video.mux(packet)
    return out.getvalue()


@pytest.mark.parametrize(
    ("rotation", "stated", "top_left"),
    [
        (90, 90, (255, 0, 0)),  # ffmpeg's `-metadata:s:v rotate=90`: the top goes left
        (-90, 270, (0, 0, 255)),  # a phone held upright (ffprobe: -90): the top goes right
        (180, 180, (0, 0, 255)),
    ],
)
def test_a_rotated_phone_video_has_upright_portrait_tiles_and_states_its_rotation(
    media: MediaBench, rotation: int, stated: int, top_left: tuple[int, int, int]
) -> None:
    # Given 320x240 frames, top half red and bottom half blue, stored with a display rotation
    body = h264_video(3, rotation=rotation, paint=top_red_bottom_blue)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "phone.mp4", body)

    # When the processor runs
    result = VideoPosterProcessor(media.s3)(work)

    # Then the video is described as displayed, with its rotation (as ffprobe states it, 0-359)
    quarter_turn = rotation % 180 != 0
    width, height = (240, 320) if quarter_turn else (320, 240)
    video = result["video"]
    assert (video["width"], video["height"], video["rotation"]) == (width, height, stated)
    # And every tile and animation frame is upright at that shape
    storyboard = result["storyboard"]
    tile = (120, 160) if quarter_turn else (160, 120)
    assert (storyboard["tile_width"], storyboard["tile_height"]) == tile
    sprite = image_of(media, storyboard, "JPEG").convert("RGB")
    assert sprite.size == (3 * tile[0], tile[1])
    for n in range(3):
        assert near(sprite.getpixel((n * tile[0] + 8, 8)), top_left)
    animation = result["animation"]
    assert (animation["width"], animation["height"]) == (width, height)
    first, _ = animation_frames(image_of(media, animation, "WEBP"))[0]
    assert near(first.getpixel((8, 8)), top_left)


def test_every_tile_is_exactly_the_frame_a_full_decode_shows_at_its_time(tmp_path: Path) -> None:
    # Given a clip with B-frames and keyframes 5 s apart (frames nobody refers to are skipped on
    # the way to each tile, and tiles a second apart are decoded forward, not sought)
    path = tmp_path / "bframes.mp4"
    path.write_bytes(h264_video(12, keyframe_every=50, preset="medium", paint=moving_bar))

    # When its previews are extracted
    previews = extract_previews(path, MP4)

    # Then each tile is the frame a decode of every frame shows at the middle of its second
    assert previews.storyboard is not None
    tiles = previews.storyboard.tiles
    with av.open(str(path)) as video:
        stream = video.streams.video[0]
        assert stream.codec_context.has_b_frames
        frames = [(f.time, f) for f in video.decode(stream) if f.time is not None]
        for second, tile in enumerate(tiles):
            shown = next(frame for time, frame in frames if time >= second + 0.5)
            expected = shown.reformat(width=160, height=120, format="rgb24").to_image()  # type: ignore[no-untyped-call]
            assert tile.tobytes() == expected.tobytes(), second


def test_tiles_far_apart_are_sought_to_and_each_is_the_frame_shown_at_its_time(
    tmp_path: Path,
) -> None:
    # Given a 10-minute clip (a tile every 6 s: past the gap at which seeking pays) at 2 fps,
    # a keyframe every 4 s, its colour changing every second
    path = tmp_path / "long.mp4"
    path.write_bytes(h264_video(600, fps=2, size=(64, 48), keyframe_every=8))

    # When its previews are extracted
    previews = extract_previews(path, MP4)

    # Then there are 100 tiles of 6 s, each the colour of the second at its middle
    assert previews.storyboard is not None
    plan, tiles = previews.storyboard.plan, previews.storyboard.tiles
    assert (plan.tiles, plan.interval_s, len(tiles)) == (100, 6.0, 100)
    for index, tile in enumerate(tiles):
        second = int(plan.tile_time(index))
        assert near(tile.getpixel((tile.width // 2, tile.height // 2)), colour_of_second(second))


@pytest.mark.parametrize(
    ("duration", "interval", "tiles", "rows"),
    [
        (0.4, 1.0, 1, 1),
        (20.0, 1.0, 20, 2),
        (20.05, 1.0, 21, 3),  # the last stretch is 50 ms
        (150.0, 1.5, 100, 10),
        (3600.0, 36.0, 100, 10),
        (3601.0, 36.01, 100, 10),
    ],
)
def test_a_storyboard_has_a_tile_a_second_or_a_hundredth_of_a_longer_video(
    duration: float, interval: float, tiles: int, rows: int
) -> None:
    plan = storyboard_plan(duration)
    assert plan is not None
    assert (plan.interval_s, plan.tiles, plan.rows) == (interval, tiles, rows)
    # and its index covers the whole video, cue after cue, each tile's time inside its cue
    cues = cues_of(storyboard_vtt(plan, (160, 90), "storyboard.jpg"))
    assert len(cues) == tiles
    assert cues[0][0] == 0.0 and cues[-1][1] == pytest.approx(duration, abs=0.0005)
    assert all(cues[i][1] == cues[i + 1][0] for i in range(tiles - 1))
    assert all(start < plan.tile_time(i) < end for i, (start, end, _, _) in enumerate(cues))
    assert storyboard_plan(None) is None and storyboard_plan(0.0) is None


def test_past_its_decoding_budget_a_storyboard_shows_the_keyframe_before_each_tile(
    tmp_path: Path,
) -> None:
    # Given a 20 s clip with a keyframe every 5 s, and a budget of about one frame
    path = tmp_path / "sparse.mp4"
    path.write_bytes(h264_video(20, keyframe_every=50))

    # When its previews are extracted
    previews = extract_previews(path, MP4, budget_pixels=320 * 240)

    # Then there are still 20 tiles, each the keyframe at or before its time (0, 5, 10, 15 s)
    assert previews.storyboard is not None
    tiles = previews.storyboard.tiles
    assert len(tiles) == 20
    for second, tile in enumerate(tiles):
        keyframe_second = second // 5 * 5
        assert near(tile.getpixel((80, 60)), colour_of_second(keyframe_second)), second


def test_a_few_damaged_packets_are_skipped_and_every_tile_still_drawn(media: MediaBench) -> None:
    # Given a 20 s video with 20 bytes of its media data (`mdat`, not its index) inverted
    clip = h264_video(20)
    media_data = clip.find(b"mdat") + 4
    body = clip[:media_data] + flipped(clip[media_data:], flips=20, seed=2, within=0.75)
    assert len(body) == len(clip)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, "scratched.mp4", body)

    # When the processor runs, then the damaged frames are skipped (FFmpeg's tools do the same)
    # and the storyboard still has a tile for every second
    result = VideoPosterProcessor(media.s3)(work)
    assert result["storyboard"]["tiles"] == 20
    assert len(cues_of(media.output(result["storyboard_index"]["key"]).decode())) == 20


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("cut.mp4", lambda: h264_video(20)[:3000], "not a readable video"),
        (
            "noise.mp4",
            lambda: b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 64,
            "not a readable",
        ),
    ],
    ids=["truncated", "corrupt"],
)
def test_a_truncated_or_corrupt_video_fails_permanently_saying_so(
    media: MediaBench, name: str, body: object, message: str
) -> None:
    assert callable(body)
    work = media.work_for(JobType.VIDEO_THUMBNAIL, name, body())

    with pytest.raises(PermanentError, match=message):
        VideoPosterProcessor(media.s3)(work)
    assert media.s3.list_objects_v2(Bucket=media.outputs).get("KeyCount", 0) == 0


def test_a_cancelled_job_stops_and_writes_nothing(media: MediaBench) -> None:
    # Given a job cancelled once its download is done
    checks: list[int] = []

    def cancelled_after_download() -> bool:
        checks.append(1)
        return len(checks) > 1

    work = media.work_for(
        JobType.VIDEO_THUMBNAIL, "clip.mp4", h264_video(20), should_stop=cancelled_after_download
    )

    # When the processor runs, then it stops, and no poster, sprite, index or animation is written
    with pytest.raises(StopRequested):
        VideoPosterProcessor(media.s3)(work)
    assert media.s3.list_objects_v2(Bucket=media.outputs).get("KeyCount", 0) == 0


# --- a file larger than the function's disk: read by ranges, never downloaded ------------------


def test_a_video_larger_than_the_workspace_holds_is_read_by_ranges_to_the_same_previews(
    media: MediaBench,
) -> None:
    # Given a 20 s video whose index (`moov`) follows its media data, at the end of the file
    body = h264_video(20)
    assert body.rfind(b"moov") > body.find(b"mdat")
    downloaded = media.work_for(JobType.VIDEO_THUMBNAIL, "clip.mp4", body)
    by_ranges = media.work_for(JobType.VIDEO_THUMBNAIL, "clip.mp4", body)

    # When one job may download it and the other's workspace holds only a quarter of it
    expected = VideoPosterProcessor(media.s3)(downloaded)
    result = VideoPosterProcessor(media.s3, max_bytes=len(body) // 4)(by_ranges)

    # Then the second read it by ranges, never into its workspace, and wrote the same files
    assert [p.stat().st_size for p in by_ranges.workspace.iterdir()] in ([], [0])
    notes = by_ranges.notes.snapshot().lines
    assert any(line.startswith("reading ") and " by ranges" in line for line in notes)
    for field in ("poster", "storyboard", "storyboard_index", "animation"):
        assert {**result[field], "key": None} == {**expected[field], "key": None}, field
        assert media.output(result[field]["key"]) == media.output(expected[field]["key"]), field
    assert result["video"] == expected["video"]
