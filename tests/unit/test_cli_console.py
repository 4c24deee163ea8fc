"""Specification: `filejobs search`, `failures` and `bulk`, before and after they talk to a stack:
what they accept (every refusal before any request), the requests they send, how they page, and
how they show the API's answers (docs/CONSOLE.md), on recorded answers.

(tests/integration/test_cli_console.py runs them against the local stack.)
"""

from __future__ import annotations

import argparse
import io
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from filejobs.api import parsing
from filejobs.domain.failures import FAILURE_GROUP_PATTERN
from filejobs.domain.job import JobType
from filejobs.domain.operations import BULK_ACTIONS, OPERATION_ID_PATTERN
from filejobs.services.api import MAX_KEY_BYTES
from filejobs_cli import console
from filejobs_cli.client import CliError, HttpError, UsageError
from filejobs_cli.contract import JOB_TYPES
from filejobs_cli.main import main, parser

GROUP = "thumbnail_generation.3f2a9c1b7e4d5a60"
OP_ID = "op-20261204T120000Z-5f3c2a1b"
JOB_IDS = [f"00000000-0000-4000-8000-00000000000{n}" for n in range(7)]

# GET /failures as docs/CONSOLE.md gives it.
FAILURES: dict[str, Any] = {
    "groups": [
        {
            "id": GROUP,
            "job_type": "thumbnail_generation",
            "fingerprint": "cannot identify image file <path>",
            "count": 40000,
            "first_seen": "2026-12-04T09:00:00+00:00",
            "last_seen": "2026-12-04T11:59:30.250000+00:00",
            "sample": {
                "job_id": JOB_IDS[0],
                "tenant": "acme",
                "error_message": "cannot identify image file '/tmp/x/1.png'",
            },
        },
        {
            "id": "virus_scan.0123456789abcdef",
            "job_type": "virus_scan",
            "fingerprint": "engine unavailable after <n> tries",
            "count": 2,
            "first_seen": "2026-12-04T10:00:00+00:00",
            "last_seen": "2026-12-04T10:05:00+00:00",
            "sample": {"job_id": JOB_IDS[1], "tenant": "globex", "error_message": "x" * 300},
        },
    ]
}


def job(n: int, status: str = "failed", **extra: Any) -> dict[str, Any]:
    return {
        "id": JOB_IDS[n],
        "tenant": "acme",
        "job_type": "thumbnail_generation",
        "status": status,
        "attempt": 1,
        "attempts": [{"number": 1, "outcome": "failed"}],
        "created_at": "2026-12-04T12:00:00.123456+00:00",
        "error_message": "the file is not an image its type's decoder reads (decoders: png)",
        **extra,
    }


def operation(status: str = "running", **counts: Any) -> dict[str, Any]:
    return {
        "id": OP_ID,
        "action": "retry",
        "filter": {"group": GROUP},
        "reason": "bad deploy fixed in v42",
        "tenant": None,
        "created_by": "api:operator",
        "created_at": "2026-12-04T12:00:00+00:00",
        "updated_at": "2026-12-04T12:00:01+00:00",
        "status": status,
        "matched": 3,
        "processed": 0,
        "changed": 0,
        "skipped": 0,
        "errors": 0,
        "finished_at": None if status == "running" else "2026-12-04T12:00:03+00:00",
        "error": None,
        **counts,
    }


class FakeApi:
    """An ApiClient answering from a script: each (method, path) its answers in turn."""

    def __init__(self, answers: dict[tuple[str, str], list[Any]]) -> None:
        self.answers = answers
        self.calls: list[dict[str, Any]] = []

    def __call__(self, target: Any) -> FakeApi:  # stands in for the ApiClient class
        return self

    def get(self, path: str, query: dict[str, str | None] | None = None) -> Any:
        return self._answer("GET", path, query=query)

    def post(
        self,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        repeatable: bool | None = None,
    ) -> Any:
        return self._answer("POST", path, body=body, headers=headers)

    def _answer(self, method: str, path: str, **sent: Any) -> Any:
        self.calls.append({"method": method, "path": path, **sent})
        queue = self.answers[(method, path)]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def parsed(*argv: str) -> argparse.Namespace:
    return parser().parse_args(list(argv))


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[tuple[str, str], list[Any]]], FakeApi]:
    monkeypatch.setattr(console, "POLL_SECONDS", 0)

    def install(answers: dict[tuple[str, str], list[Any]]) -> FakeApi:
        fake = FakeApi(answers)
        monkeypatch.setattr(console, "ApiClient", fake)
        return fake

    return install


# --- arguments ----------------------------------------------------------------------------------


def test_a_search_sends_each_filter_given_with_times_in_utc() -> None:
    arguments = parsed(
        "search", "--tenant", "acme", "--status", "failed", "--type", "thumbnail_generation",
        "--error", "not an image", "--since", "2026-12-04T13:00:00+01:00", "--until", "2026-12-05",
    )  # fmt: skip

    console.check_search(arguments)
    assert console.filter_of(arguments) == {
        "tenant": "acme",
        "job_type": "thumbnail_generation",
        "status": "failed",
        "error": "not an image",
        "since": "2026-12-04T12:00:00+00:00",
        "until": "2026-12-05T00:00:00+00:00",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tenant", "acme", "--limit", "5", "--all"], "--limit or --all, not both"),
        (["--tenant", "acme", "--prefix", "uploads/acme/", "--status", "failed"], "--status"),
        (["--prefix", "uploads/acme/"], "give --tenant"),
        (["--type", "virus_scan"], "give --tenant, --status or --group"),
        (["--group", GROUP, "--type", "virus_scan"], "thumbnail_generation group"),
        (["--group", GROUP, "--status", "completed"], "failed jobs only"),
        (["--status", "failed", "--since", "2026-12-05", "--until", "2026-12-04"], "before"),
    ],
)
def test_a_search_the_api_would_refuse_is_a_usage_error(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        console.check_search(parsed("search", *argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--group", "thumbnail_generation.3f2a"],
        ["search", "--group", "painting.3f2a9c1b7e4d5a60"],
        ["search", "--status", "failed", "--since", "yesterday"],
        ["search", "--status", "broken"],
        ["search", "--status", "failed", "--limit", "0"],
        ["search", "--status", "failed", "--error", ""],
        ["search", "--tenant", "a/b"],
        ["failures", "--type", "painting"],
        ["bulk", "retry", "--status", "failed"],  # no --reason
        ["bulk", "retry", "--status", "failed", "--reason", "   "],
        ["bulk", "retry", "--status", "failed", "--reason", "x" * 501],
        ["bulk", "explode", "--status", "failed", "--reason", "r"],
        ["bulk", "status", "op-1"],
    ],
)
def test_a_malformed_argument_exits_2_before_any_request(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_the_cli_checks_ids_and_filter_fields_as_the_api_does() -> None:
    # the CLI ships without the layer: its copies of the API's patterns and fields must agree
    # a group id: a job type (checked against the CLI's list of them), a dot, 16 hex digits
    types = "|".join(t.value for t in JobType)
    assert f"^({types})" + r"\.[0-9a-f]{16}$" == FAILURE_GROUP_PATTERN
    assert console._GROUP.pattern == r"(?P<type>[a-z_]+)\.[0-9a-f]{16}"
    assert set(JOB_TYPES) == {t.value for t in JobType}
    assert f"^{console._OPERATION_ID.pattern}$" == OPERATION_ID_PATTERN
    assert set(console.FILTER_FIELDS) == parsing.FILTER_FIELDS
    assert tuple(a.value for a in BULK_ACTIONS) == console.ACTIONS
    assert (console.MAX_REASON, console.MAX_KEY_BYTES) == (
        parsing.MAX_REASON_LENGTH,
        MAX_KEY_BYTES,
    )


def test_without_a_reason_bulk_says_it_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bulk", "retry", "--group", GROUP])
    assert "the following arguments are required: --reason" in capsys.readouterr().err


def test_a_bulk_action_without_a_terminal_or_yes_is_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given no terminal to ask on (and no local stack: nothing may be requested anyway)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    # when a bulk retry is given neither --yes nor --dry-run
    code = main(["bulk", "retry", "--group", GROUP, "--reason", "r"])
    # then it is refused as a usage error saying what to give
    assert code == 2
    assert "give --yes to start it, or --dry-run" in capsys.readouterr().err
    # while --dry-run or --yes pass the check, and a terminal may be asked
    for extra in (["--dry-run"], ["--yes"]):
        console.check_bulk(parsed("bulk", "retry", "--group", GROUP, "--reason", "r", *extra))
    console.check_bulk(parsed("bulk", "retry", "--group", GROUP, "--reason", "r"), Terminal())


def test_an_operators_bulk_action_names_a_tenant_a_status_or_a_group() -> None:
    with pytest.raises(UsageError, match="give --tenant, --status or --group"):
        console.check_bulk(parsed("bulk", "cancel", "--type", "virus_scan", "--reason", "r"))


# --- search -------------------------------------------------------------------------------------


def test_a_search_follows_next_token_through_short_pages_up_to_its_limit(
    api: Callable[..., FakeApi],
) -> None:
    # given pages of 2, 0 (the read budget spent) and 3 jobs, each with a next_token
    fake = api(
        {
            ("GET", "/jobs"): [
                {"jobs": [job(0), job(1)], "next_token": "t1"},
                {"jobs": [], "next_token": "t2"},
                {"jobs": [job(2), job(3), job(4)], "next_token": "t3"},
            ]
        }
    )
    out = io.StringIO()
    # when 5 failed thumbnails are searched
    code = console.search(
        parsed("search", "--status", "failed", "--type", "thumbnail_generation", "--limit", "5"),
        target=None,  # type: ignore[arg-type]
        out=out,
    )
    # then each page asks for what remains, continuing from the last token, and stops at 5
    assert code == 0
    sent = [(c["query"]["limit"], c["query"]["next_token"]) for c in fake.calls]
    assert sent == [("5", None), ("3", "t1"), ("3", "t2")]
    assert fake.calls[0]["query"]["status"] == "failed"
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["ID", "TENANT", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "ERROR"]
    assert [line.split()[0] for line in lines[1:6]] == JOB_IDS[:5]
    assert lines[1].split()[1:7] == [
        "acme", "thumbnail_generation", "failed", "1", "2026-12-04", "12:00:00",
    ]  # fmt: skip
    assert lines[6] == "(more: --limit N for more than 5, or --all)"


def test_a_search_with_all_reads_to_the_last_page_in_full_pages(
    api: Callable[..., FakeApi],
) -> None:
    fake = api(
        {
            ("GET", "/jobs"): [
                {"jobs": [job(0)], "next_token": "t1"},
                {"jobs": [job(1)], "next_token": None},
            ]
        }
    )
    out = io.StringIO()

    console.search(parsed("search", "--group", GROUP, "--all", "--json"), None, out)  # type: ignore[arg-type]

    assert [c["query"]["limit"] for c in fake.calls] == ["100", "100"]
    assert fake.calls[0]["query"]["group"] == GROUP
    assert json.loads(out.getvalue()) == {"jobs": [job(0), job(1)], "next_token": None}


def test_a_search_by_prefix_lists_files(api: Callable[..., FakeApi]) -> None:
    stored = {
        "id": JOB_IDS[5],
        "key": "uploads/acme/a/1.png",
        "size": 2048,
        "status": "active",
        "scan_status": "clean",
    }
    fake = api({("GET", "/files"): [{"tenant": "acme", "files": [stored], "next_token": None}]})
    out = io.StringIO()

    args = parsed("search", "--tenant", "acme", "--prefix", "uploads/acme/a/")
    console.search(args, None, out)  # type: ignore[arg-type]

    assert fake.calls[0]["query"] == {
        "prefix": "uploads/acme/a/",
        "tenant": "acme",
        "limit": "25",
        "next_token": None,
    }
    lines = out.getvalue().splitlines()
    assert [line.split() for line in lines] == [
        ["ID", "KEY", "SIZE", "STATUS", "SCAN"],
        [JOB_IDS[5], "uploads/acme/a/1.png", "2048", "active", "clean"],
    ]


def test_a_long_error_is_shortened_in_the_table() -> None:
    lines = console.render_jobs([job(0, error_message="boom " * 40)])
    assert lines[1].endswith("…") and len(lines[1].split("  ")[-1]) <= 60


# --- failures -----------------------------------------------------------------------------------


def test_failure_groups_render_one_line_each_largest_first(api: Callable[..., FakeApi]) -> None:
    fake = api({("GET", "/failures"): [FAILURES]})
    out = io.StringIO()

    args = parsed("failures", "--tenant", "acme", "--type", "thumbnail_generation")
    assert console.failures(args, None, out) == 0  # type: ignore[arg-type]

    assert fake.calls[0]["query"] == {"tenant": "acme", "job_type": "thumbnail_generation"}
    lines = out.getvalue().splitlines()
    header = lines[0]
    assert header.split("  ")[0] == "GROUP" and "FIRST SEEN" in header and "SAMPLE ERROR" in header
    assert lines[1].split()[:7] == [
        GROUP, "thumbnail_generation", "40000",
        "2026-12-04", "09:00:00", "2026-12-04", "11:59:30",
    ]  # fmt: skip
    assert "cannot identify image file <path>" in lines[1]
    assert lines[1].endswith("cannot identify image file '/tmp/x/1.png'")
    # a long sample error is shortened, and columns stay aligned
    assert lines[2].endswith("…")
    assert lines[1].index("40000") == lines[2].index("2 ")


def test_failures_as_json_is_the_apis_answer(api: Callable[..., FakeApi]) -> None:
    api({("GET", "/failures"): [FAILURES]})
    out = io.StringIO()
    console.failures(parsed("failures", "--json"), None, out)  # type: ignore[arg-type]
    assert json.loads(out.getvalue()) == FAILURES


@pytest.mark.parametrize(
    "missing",
    [
        HttpError(404, "not_found", "no such route"),  # the API function's
        HttpError(404, "not_found", "no route for /failures"),  # the local stack's front
        HttpError(403, "http_error", "the API answered HTTP 403: Missing Authentication Token"),
    ],
)
def test_an_api_without_the_failures_route_is_said_plainly(
    api: Callable[..., FakeApi], missing: HttpError
) -> None:
    api({("GET", "/failures"): [missing]})
    target = argparse.Namespace(description="the local stack at http://127.0.0.1:3000")

    with pytest.raises(CliError, match="has no GET /failures: its API is older than this CLI"):
        console.failures(parsed("failures"), target, io.StringIO())  # type: ignore[arg-type]


def test_a_tenant_the_caller_may_not_see_is_the_apis_own_refusal(
    api: Callable[..., FakeApi],
) -> None:
    api({("GET", "/failures"): [HttpError(404, "not_found", "no tenant 'globex'")]})

    with pytest.raises(HttpError, match="no tenant 'globex'"):
        console.failures(parsed("failures", "--tenant", "globex"), None, io.StringIO())  # type: ignore[arg-type]


# --- bulk ---------------------------------------------------------------------------------------


def preview(matched: int = 3, exact: bool = True) -> dict[str, Any]:
    return {
        "dry_run": True,
        "action": "retry",
        "filter": {"group": GROUP},
        "matched": matched,
        "exact": exact,
        "sample": [job(n) for n in range(min(matched, 7))],
    }


def test_a_dry_run_prints_the_count_and_a_few_sample_ids_and_starts_nothing(
    api: Callable[..., FakeApi],
) -> None:
    fake = api({("POST", "/operations"): [preview(matched=7)]})
    out = io.StringIO()

    args = parsed("bulk", "retry", "--group", GROUP, "--reason", "fixed", "--dry-run")
    assert console.bulk(args, None, out) == 0  # type: ignore[arg-type]

    assert fake.calls == [
        {
            "method": "POST",
            "path": "/operations",
            "body": {
                "action": "retry",
                "filter": {"group": GROUP},
                "reason": "fixed",
                "dry_run": True,
            },
            "headers": None,
        }
    ]
    lines = out.getvalue().splitlines()
    assert lines[0] == f"would retry 7 jobs (group={GROUP})"
    assert [line.split()[1] for line in lines[1:]] == JOB_IDS[: console.SAMPLE_SHOWN]


def test_a_count_that_stopped_at_its_budget_says_at_least() -> None:
    assert console.dry_run_lines("cancel", {**preview(), "exact": False, "sample": []}) == [
        f"would cancel at least 3 jobs (group={GROUP})"
    ]
    assert console.dry_run_lines("rescan", {**preview(1), "sample": []}) == [
        f"would rescan the files of 1 job (group={GROUP})"
    ]


def test_with_yes_it_starts_under_a_fresh_key_and_follows_to_success(
    api: Callable[..., FakeApi],
) -> None:
    # given an operation that runs for two polls, then succeeds
    fake = api(
        {
            ("POST", "/operations"): [preview(), operation()],
            ("GET", f"/operations/{OP_ID}"): [
                operation(processed=2, changed=2),
                operation(processed=2, changed=2),
                operation("succeeded", processed=3, changed=3),
            ],
        }
    )
    out = io.StringIO()
    # when it is started with --yes (not a terminal)
    args = parsed("bulk", "retry", "--group", GROUP, "--reason", "fixed", "--yes")
    code = console.bulk(args, None, out)  # type: ignore[arg-type]
    # then the dry run came first, then the operation with a uuid4 key, printed
    assert code == 0
    first, second = fake.calls[:2]
    assert first["body"]["dry_run"] is True and "dry_run" not in second["body"]
    key = second["headers"]["Idempotency-Key"]
    assert uuid.UUID(key).version == 4
    text = out.getvalue()
    assert f"Idempotency-Key: {key}\noperation {OP_ID} started\n" in text
    # and each change of progress is one plain line, the same progress once
    progress = [line for line in text.splitlines() if line.startswith(f"{OP_ID}: ")]
    assert progress == [
        f"{OP_ID}: running, 0/3 processed, 0 changed, 0 skipped, 0 errors",
        f"{OP_ID}: running, 2/3 processed, 2 changed, 0 skipped, 0 errors",
        f"{OP_ID}: succeeded, 3/3 processed, 3 changed, 0 skipped, 0 errors",
    ]
    assert "\x1b[" not in text
    assert [c["method"] for c in fake.calls] == ["POST", "POST", "GET", "GET", "GET"]


@pytest.mark.parametrize(
    "finished",
    [
        operation("succeeded", processed=3, changed=2, errors=1),
        operation("failed", processed=1, error="the operations table refused the write"),
    ],
)
def test_an_operation_with_errors_or_failed_exits_1(
    api: Callable[..., FakeApi], finished: dict[str, Any]
) -> None:
    api(
        {
            ("POST", "/operations"): [preview(), operation()],
            ("GET", f"/operations/{OP_ID}"): [finished],
        }
    )
    out = io.StringIO()

    args = parsed("bulk", "retry", "--group", GROUP, "--reason", "r", "--yes")
    assert console.bulk(args, None, out) == 1  # type: ignore[arg-type]
    if finished["error"]:
        assert f"operation {OP_ID}: the operations table refused the write" in out.getvalue()


def test_on_a_terminal_it_asks_and_redraws_one_line(api: Callable[..., FakeApi]) -> None:
    fake = api(
        {
            ("POST", "/operations"): [preview(), operation()],
            ("GET", f"/operations/{OP_ID}"): [operation("succeeded", processed=3, changed=3)],
        }
    )
    terminal = Terminal()

    args = parsed("bulk", "retry", "--group", GROUP, "--reason", "fixed")
    code = console.bulk(args, None, terminal, stdin=Terminal("yes\n"))  # type: ignore[arg-type]

    assert code == 0 and len(fake.calls) == 3
    text = terminal.getvalue()
    assert "retry 3 jobs, reason 'fixed'? [y/N] " in text
    assert f"\r\x1b[2K{OP_ID}: running" in text
    assert text.endswith(
        f"\r\x1b[2K{OP_ID}: succeeded, 3/3 processed, 3 changed, 0 skipped, 0 errors\n"
    )


def test_an_answer_other_than_yes_changes_nothing(api: Callable[..., FakeApi]) -> None:
    fake = api({("POST", "/operations"): [preview()]})
    out = Terminal()

    args = parsed("bulk", "delete", "--status", "failed", "--reason", "r")
    code = console.bulk(args, None, out, stdin=Terminal("\n"))  # type: ignore[arg-type]

    assert code == 1 and len(fake.calls) == 1
    assert out.getvalue().endswith("not confirmed: nothing changed\n")


def test_nothing_matched_starts_nothing(api: Callable[..., FakeApi]) -> None:
    fake = api({("POST", "/operations"): [preview(matched=0)]})
    out = io.StringIO()

    args = parsed("bulk", "retry", "--group", GROUP, "--reason", "r", "--yes")
    assert console.bulk(args, None, out) == 0  # type: ignore[arg-type]

    assert len(fake.calls) == 1 and "nothing to retry: no job matches" in out.getvalue()


def test_json_keeps_stdout_one_document_and_says_the_rest_on_stderr(
    api: Callable[..., FakeApi],
) -> None:
    started = operation()
    api({("POST", "/operations"): [preview(), started]})
    out, err = io.StringIO(), io.StringIO()

    args = parsed(
        "bulk", "retry", "--group", GROUP, "--reason", "r", "--yes", "--no-wait", "--json"
    )
    assert console.bulk(args, None, out, err=err) == 0  # type: ignore[arg-type]

    assert json.loads(out.getvalue()) == started
    assert "would retry 3 jobs" in err.getvalue() and "Idempotency-Key: " in err.getvalue()


def test_a_poll_that_fails_says_the_operation_goes_on(api: Callable[..., FakeApi]) -> None:
    api(
        {
            ("POST", "/operations"): [preview(), operation()],
            ("GET", f"/operations/{OP_ID}"): [HttpError(502, "http_error", "bad gateway")],
        }
    )
    args = parsed("bulk", "retry", "--group", GROUP, "--reason", "r", "--yes")

    with pytest.raises(CliError, match=f"goes on: filejobs bulk status {OP_ID}"):
        console.bulk(args, None, io.StringIO())  # type: ignore[arg-type]


# --- an operation and the audit list ------------------------------------------------------------


def test_an_operation_is_shown_with_who_why_what_and_how_far() -> None:
    shown = console.render_operation(operation("succeeded", processed=3, changed=3)).splitlines()
    assert shown == [
        f"operation {OP_ID}",
        "  action:   retry",
        "  status:   succeeded (finished 2026-12-04 12:00:03)",
        f"  filter:   group={GROUP}",
        "  reason:   bad deploy fixed in v42",
        "  by:       api:operator at 2026-12-04 12:00:00",
        "  progress: 3/3 processed, 3 changed, 0 skipped, 0 errors",
    ]


def test_the_audit_list_pages_and_shows_one_operation_a_line(api: Callable[..., FakeApi]) -> None:
    other = {
        **operation("failed"),
        "id": "op-20261204T110000Z-00000001",
        "action": "cancel",
        "filter": {"tenant": "acme", "job_type": "virus_scan", "status": "pending"},
        "created_by": "api:tenant:acme",
        "reason": "incident 7",
    }
    fake = api(
        {
            ("GET", "/operations"): [
                {"operations": [operation("succeeded", processed=3, changed=3)], "next_token": "n"},
                {"operations": [other], "next_token": None},
            ]
        }
    )
    out = io.StringIO()

    console.operation_list(parsed("bulk", "list", "--tenant", "acme"), None, out)  # type: ignore[arg-type]

    assert [c["query"]["tenant"] for c in fake.calls] == ["acme", "acme"]
    lines = out.getvalue().splitlines()
    assert lines[0].split() == [
        "ID", "ACTION", "WHO", "WHEN", "STATUS", "DONE", "CHANGED", "SKIPPED", "ERRORS",
        "FILTER", "REASON",
    ]  # fmt: skip
    assert lines[1].split()[:10] == [
        OP_ID, "retry", "api:operator", "2026-12-04", "12:00:00", "succeeded", "3/3", "3", "0",
        "0",
    ]  # fmt: skip
    # the filter and the reason last, in their own aligned columns
    cells = [re.split(r"\s{2,}", line) for line in lines[1:]]
    assert cells[0][-2:] == [f"group={GROUP}", "bad deploy fixed in v42"]
    assert cells[1][-2:] == ["tenant=acme, job_type=virus_scan, status=pending", "incident 7"]
    assert lines[1].index("bad deploy") == lines[2].index("incident 7")
