"""The processor test bench itself: an upload becomes the job ingest would make, with a Work."""

from __future__ import annotations

from filejobs.domain.job import JobType
from filejobs.processors.digest import ObjectDigest
from tests.processing import MediaBench


def test_a_processor_reads_the_uploaded_version_and_writes_to_the_outputs_bucket(
    media: MediaBench,
) -> None:
    work = media.work_for(JobType.DEDUPLICATION_CHECK, "notes.txt", b"hello\n")
    assert work.job.input_data is not None and work.job.input_data["version_id"]
    assert ObjectDigest(media.s3)(work)["size"] == 6
    key = work.outputs.put_bytes("x.txt", b"derived", "text/plain")
    assert media.output(key) == b"derived"
    assert work.workspace.is_dir()
