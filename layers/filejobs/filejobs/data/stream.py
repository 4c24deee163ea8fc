"""Items as a DynamoDB stream delivers them (typed attribute values) -> domain entities."""

from __future__ import annotations

from typing import Any

from filejobs.data.mapping import file_from_model, job_from_model
from filejobs.data.models import FileModel, JobModel
from filejobs.domain.file import StoredFile
from filejobs.domain.job import ProcessingJob


def job_from_image(image: dict[str, Any]) -> ProcessingJob:
    return job_from_model(JobModel.from_raw_data(image))


def file_from_image(image: dict[str, Any]) -> StoredFile:
    return file_from_model(FileModel.from_raw_data(image))
