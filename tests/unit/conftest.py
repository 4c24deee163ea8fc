"""The fakes the services' unit tests share (tests/fakes.py); `clock` is tests/conftest.py's."""

from __future__ import annotations

import pytest

from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher


@pytest.fixture
def jobs() -> InMemoryJobStore:
    return InMemoryJobStore()


@pytest.fixture
def files(jobs: InMemoryJobStore) -> InMemoryFileStore:
    return InMemoryFileStore(jobs)


@pytest.fixture
def sent() -> RecordingDispatcher:
    return RecordingDispatcher()
