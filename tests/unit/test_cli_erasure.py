"""`filejobs erase --tenant T` and `filejobs delete FILE_ID` (cli/filejobs_cli/erasure.py): what
each asks before it erases, what it sends, what it prints; against a scripted API."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from filejobs_cli import console, erasure
from filejobs_cli.main import main
from tests.unit.test_cli_console import FakeApi, Terminal, parsed

OPERATION = "op-20261205T120000Z-5f3c2a1b"
FILE_ID = "3cf5a011-913b-502b-bccc-0eb41b30395d"
ERASURE_PATH = "/tenants/leaving/erasure"


class ErasingApi(FakeApi):
    def request(self, method: str, path: str, **sent: Any) -> Any:
        return self._answer(method, path, **sent)


def operation(status: str, processed: int, removed: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": OPERATION, "action": "erase", "status": status, "matched": 3,
        "processed": processed, "changed": processed, "skipped": 0, "errors": 0,
        "removed": removed or {}, "error": None,
    }  # fmt: skip


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[tuple[str, str], list[Any]]], FakeApi]:
    monkeypatch.setattr(console, "POLL_SECONDS", 0)

    def install(answers: dict[tuple[str, str], list[Any]]) -> FakeApi:
        fake = ErasingApi(answers)
        monkeypatch.setattr(erasure, "ApiClient", fake)
        return fake

    return install


def test_erasing_without_a_terminal_or_yes_is_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    for argv in (["erase", "--tenant", "leaving", "--reason", "r"], ["delete", FILE_ID]):
        assert main(argv) == 2
        assert "give --yes" in capsys.readouterr().err


def test_an_erasure_shows_its_dry_run_and_declined_erases_nothing(
    api: Callable[..., FakeApi],
) -> None:
    fake = api({("POST", ERASURE_PATH): [{"dry_run": True, "files": 3, "exact": True}]})
    out = io.StringIO()

    code = erasure.erase(
        parsed("erase", "--tenant", "leaving", "--reason", "contract ended"),
        target=None,  # type: ignore[arg-type]
        out=out,
        stdin=Terminal("n\n"),
    )

    assert code == 1
    assert "would erase tenant leaving: 3 files" in out.getvalue()
    assert "erase tenant leaving (3 files) for good, reason 'contract ended'?" in out.getvalue()
    assert "not confirmed: nothing erased" in out.getvalue()
    assert [c["body"] for c in fake.calls] == [{"reason": "contract ended", "dry_run": True}]


def test_an_erasure_with_yes_and_wait_starts_once_and_follows_it_to_its_end(
    api: Callable[..., FakeApi],
) -> None:
    fake = api(
        {
            ("POST", ERASURE_PATH): [
                {"dry_run": True, "files": 3, "exact": True},
                operation("running", 0),
            ],
            ("GET", f"/operations/{OPERATION}"): [
                operation("running", 2),
                operation("succeeded", 3, {"schedules": 1, "upload_versions": 4}),
            ],
        }
    )
    out, err = io.StringIO(), io.StringIO()

    code = erasure.erase(
        parsed("erase", "--tenant", "leaving", "--reason", "r", "--yes", "--wait", "--json"),
        target=None,  # type: ignore[arg-type]
        out=out,
        err=err,
    )

    assert code == 0
    start = fake.calls[1]
    assert start["body"] == {"reason": "r"} and "Idempotency-Key" in start["headers"]
    said = err.getvalue()
    assert f"{OPERATION}: running, 2/3 processed" in said
    assert f"{OPERATION}: succeeded, 3/3 processed" in said
    assert "removed: 1 schedules, 4 upload versions" in said
    assert json.loads(out.getvalue())["status"] == "succeeded"


def test_deleting_a_file_prints_its_audit_record(api: Callable[..., FakeApi]) -> None:
    record = {
        "tenant": "acme", "file_ids": [FILE_ID], "erased_at": "2026-12-05T12:00:00+00:00",
        "erased_by": "api:operator", "versions_deleted": 2, "outputs_deleted": 5,
        "jobs_erased": 6, "operation_id": None,
    }  # fmt: skip
    fake = api({("DELETE", f"/files/{FILE_ID}"): [record]})
    out = io.StringIO()

    code = erasure.delete(parsed("delete", FILE_ID), None, out, stdin=Terminal("y\n"))  # type: ignore[arg-type]

    assert code == 0
    assert [c["method"] for c in fake.calls] == ["DELETE"]
    assert f"erased {FILE_ID} of tenant acme" in out.getvalue()
    assert "2 versions, 5 outputs, 6 jobs" in out.getvalue()
