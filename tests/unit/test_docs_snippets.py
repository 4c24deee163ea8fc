"""The manual's code examples are files (docs/snippets/) that its pages include and these tests run:
every shell snippet parses; each one a page includes, and no page names one that is not there;
the webhooks, presets and `sam local` examples, run against a recorder, make calls the CLI's own
parser, the API's parsing and the template accept; the options `make dev`'s synopsis names are
`filejobs dev`'s. (The job requests: test_jobs_page_options.py; the schedule and preset requests
against the API itself: tests/integration/test_docs_snippets_api.py; the webhook signature check
on real deliveries: tests/integration/test_webhooks.py.)"""

from __future__ import annotations

import argparse
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from filejobs.access import Caller, caller_from
from filejobs.api import parsing
from filejobs.config import CallerSettings
from filejobs.domain.presets import METADATA_KEY, check_jobs
from filejobs_cli.main import parser
from tests.doc_snippets import LOCAL, ROOT, SNIPPETS, Call, run

DOCS = ROOT / "docs"
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)
WEBHOOK_ID = "wh-0123456789abcdef01234567-acme"
DELIVERY_ID = "dl-20261204T120000Z-0123456789abcdef0123"


def included() -> dict[str, list[str]]:
    """Each snippet path any page includes, with the pages that include it."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for path in INCLUDE.findall(page.read_text()):
            found.setdefault(path, []).append(page.name)
    return found


def subcommand(*names: str) -> argparse.ArgumentParser:
    """The CLI's parser of `filejobs NAME...`."""
    current = parser()
    for name in names:
        choices = next(
            action.choices
            for action in current._actions
            if isinstance(action, argparse._SubParsersAction)
        )
        current = choices[name]
    return current


@pytest.mark.parametrize("script", sorted(SNIPPETS.glob("*.sh")), ids=lambda path: path.name)
def test_each_shell_snippet_parses(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)


def test_every_snippet_is_included_by_a_page_and_every_include_is_a_snippet_file() -> None:
    paths = included()
    files = {f"docs/snippets/{path.name}" for path in SNIPPETS.iterdir() if path.is_file()}
    assert set(paths) == files
    assert all((ROOT / path).is_file() for path in paths)


def test_the_webhooks_example_runs_every_subcommand_as_the_cli_parses_it(tmp_path: Path) -> None:
    calls = run(
        ["webhooks_cli.sh"], tmp_path, {"WEBHOOK_ID": WEBHOOK_ID, "DELIVERY_ID": DELIVERY_ID}
    )
    actions = []
    for call in calls:
        assert call.program == "filejobs" and call.argv[0] == "webhooks", call
        arguments = parser().parse_args(call.argv)
        actions.append(call.argv[1])
        if call.argv[1] == "add":
            assert arguments.tenant == "acme"
    assert sorted(actions) == sorted(
        ["add", "list", "show", "rotate", "enable", "deliveries", "resend", "remove"]
    )


def test_the_presets_example_runs_as_the_cli_the_api_and_ingest_read_it(tmp_path: Path) -> None:
    calls = run(["local_api.sh", "presets.sh"], tmp_path)
    curl, *cli, aws = calls
    assert curl.program == "curl" and curl.option("-X") == ["PUT"]
    assert curl.url == f"{LOCAL['api_url']}/presets/avatars?tenant=acme"
    change = parsing.preset_change(curl.option("-d")[0])
    check_jobs(change.jobs)
    assert change.prefixes == ("uploads/acme/avatars/",)
    for call in cli:
        assert call.program == "filejobs" and call.argv[:2] == ["presets", "set"], call
        assert parser().parse_args(call.argv).tenant == "acme"
    assert aws.program == "aws" and aws.argv[:2] == ["s3", "cp"]
    assert aws.argv[3] == f"s3://{LOCAL['uploads_bucket']}/uploads/acme/inbox/scan.pdf"
    assert aws.option("--endpoint-url") == [LOCAL["endpoint_url"]]
    assert aws.option("--metadata") == [f"{METADATA_KEY}=contracts"]


def test_the_sam_local_example_names_the_template_s_functions_and_events(tmp_path: Path) -> None:
    template = (ROOT / "template.yaml").read_text()
    events, build, *invokes, start_api, curl = run(["sam_local.sh"], tmp_path)
    # the events are written by the local stack's own command, into the folder it writes
    assert (events.program, events.argv) == ("filejobs", ["events"])
    assert subcommand("events").parse_args([]).out == Path("events/local")
    assert [call.argv[:2] for call in (build, *invokes, start_api)] == [
        ["build"],
        ["local", "invoke"],
        ["local", "invoke"],
        ["local", "start-api"],
    ]
    for call in invokes:
        # a function of the template, on the event `filejobs events` writes for it
        function, event = call.argv[2], Path(call.option("-e")[0])
        assert f"\n  {function}:\n" in template, function
        assert event.parent == Path("events/local") and event.stem.split("-")[0] == function
    # the rest comes from samconfig.toml's sections for the two commands
    settings = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]
    for section in ("local_invoke", "local_start_api"):
        assert settings[section]["parameters"]["env_vars"] == ".filejobs/sam-env.json"
        assert settings[section]["parameters"]["docker_network"] == "host"
    port = settings["local_start_api"]["parameters"]["port"]
    # and the curl names its caller as the function reads it under sam local alone
    assert curl.program == "curl" and curl.url == f"http://127.0.0.1:{port}/jobs"
    [header] = curl.option("-H")
    name, _, value = header.partition(": ")
    request = {"headers": {name: value}, "requestContext": {"identity": {"sourceIp": "127.0.0.1"}}}
    under_sam = {"AWS_SAM_LOCAL": "true", "FILEJOBS_LOCAL_CALLERS": "header"}
    assert caller_from(request, CallerSettings.from_env(under_sam)) == Caller(
        tenant="acme", operator=False
    )
    assert caller_from(request, CallerSettings.from_env({})) is None


def test_every_option_of_make_dev_s_synopsis_is_one_of_filejobs_dev() -> None:
    page = (DOCS / "LOCAL_STACK.md").read_text()
    synopsis = page.split("```sh\n", 1)[1].split("```", 1)[0]
    named = set(re.findall(r"--[a-z][a-z-]+", synopsis))
    options = {o for o in subcommand("dev")._option_string_actions if o.startswith("--")}
    # every option it names is one of filejobs dev's, and every one of filejobs dev's is named
    assert named == options - {"--help"}


def test_a_recorded_call_reads_curl_s_options() -> None:
    call = Call("curl", ["-X", "POST", "http://x/y", "-H", "A: b", "-H", "C: d", "-d", "{}"])
    assert (call.option("-X"), call.option("-H"), call.url) == (
        ["POST"],
        ["A: b", "C: d"],
        "http://x/y",
    )
