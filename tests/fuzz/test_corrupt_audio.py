"""Corrupt audio through the real worker on moto: video_thumbnail's waveform decoder (FFmpeg's
demuxers and decoders, then `showwavespic`, in the decoder sandbox) on seeded mutations of valid
MP3, FLAC, WAV, Ogg Opus and M4A files, held to tests/fuzz/test_corrupt_media.py's spec: every
job ends completed or failed for good, a failure in the processor's own readable words, no hang.
"""

from __future__ import annotations

import zlib
from functools import cache

import pytest
from hypothesis import given, seed, settings

from filejobs.domain.job import JobStatus, JobType
from tests.fuzz.test_corrupt_media import (  # noqa: F401 - bench and yara_engine: fixtures
    SETTINGS,
    CorruptBench,
    Family,
    Mutation,
    bench,
    mutations,
    yara_engine,
)
from tests.integration.test_audio_waveform import tone

WAVEFORM = JobType.VIDEO_THUMBNAIL  # on audio: the waveform

# A second or less each: decoding is quick, but each mutant is a sandboxed job.
FAMILIES = (
    Family("mp3", "song.mp3", lambda: tone("libmp3lame", "mp3", seconds=1), WAVEFORM, 8),
    Family("flac", "song.flac", lambda: tone("flac", "flac", seconds=1), WAVEFORM, 8),
    Family("wav", "song.wav", lambda: tone("pcm_s16le", "wav", 0.5, rate=8000), WAVEFORM, 6),
    Family("ogg", "song.ogg", lambda: tone("libopus", "ogg", 1, rate=48000), WAVEFORM, 6),
    Family("m4a", "song.m4a", lambda: tone("aac", "ipod", seconds=1), WAVEFORM, 8),
)


@cache
def _sample(name: str) -> bytes:
    return next(f for f in FAMILIES if f.name == name).make()


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_a_corrupted_audio_file_gets_its_waveform_or_fails_for_good(
    bench: CorruptBench,  # noqa: F811 - the fixture imported above
    family: Family,
) -> None:
    # Given a valid audio file, which video_thumbnail completes with a waveform
    valid = _sample(family.name)
    (job,) = bench.ingest(family.filename, valid, (family.parser,))
    done = bench.run(job)
    assert done.status is JobStatus.COMPLETED
    assert "waveform" in (done.result_data or {})
    bench.tally.clear()

    # When seeded mutations of it are uploaded, and video_thumbnail runs on each
    @settings(SETTINGS, max_examples=family.examples)
    @seed(zlib.crc32(b"audio-" + family.name.encode()))
    @given(mutation=mutations(len(valid)))
    def each_mutant(mutation: Mutation) -> None:
        (job,) = bench.ingest(family.filename, mutation.apply(valid), (family.parser,))
        # Then the job ends completed or failed for good, readably (bench.run holds it to that)
        bench.run(job)

    each_mutant()
    bench.report(family.name)
    assert bench.tally.total() == family.examples, "every drawn mutant ran"
