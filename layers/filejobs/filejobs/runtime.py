"""Wiring for Lambda handlers: clients, repositories and services, built once per container."""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

import boto3

from filejobs.adapters.sqs import SqsDispatcher
from filejobs.config import Settings
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import bind_tables

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient


@cache
def settings() -> Settings:
    loaded = Settings.from_env()
    bind_tables(
        jobs_table=loaded.jobs_table,
        files_table=loaded.files_table,
        endpoint_url=loaded.endpoint_url,
    )
    return loaded


@cache
def s3() -> S3Client:
    return boto3.client("s3", endpoint_url=settings().endpoint_url)


@cache
def sqs() -> SQSClient:
    return boto3.client("sqs", endpoint_url=settings().endpoint_url)


@cache
def events() -> EventBridgeClient:
    return boto3.client("events", endpoint_url=settings().endpoint_url)


def jobs() -> JobRepository:
    settings()
    return JobRepository()


def files() -> FileRepository:
    settings()
    return FileRepository()


def dispatcher() -> SqsDispatcher:
    return SqsDispatcher(sqs(), settings().queue_urls)


def worker_id(context_request_id: str | None = None) -> str:
    name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "worker")
    return f"{name}:{context_request_id}" if context_request_id else name


def reset() -> None:
    """Forget every cached client and setting (tests change the environment between cases)."""
    for cached in (settings, s3, sqs, events):
        cached.cache_clear()
