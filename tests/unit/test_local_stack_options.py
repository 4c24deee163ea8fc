"""The local stack's options (local/stack.py): parameters, sweeps, crashes for chaos runs; the
definitions mirror, the ClamAV layer's stand-in and the custom resources run at start."""

from __future__ import annotations

import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.faults import CRASH_EXIT_CODE
from filejobs_dev.local.host import schedule_interval
from filejobs_dev.local.metering import METER_LOG_VARIABLE
from filejobs_dev.local.resources import Resources
from filejobs_dev.local.stack import (
    RESTART_LIMIT,
    LocalStack,
    ResponseReceiver,
    StackConfigError,
    StackOptions,
    StackStartError,
    on_this_machine,
    service_function,
)

ROOT = Path(__file__).resolve().parents[2]


class Spawns:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, name: str, source: str, *extra: str) -> None:
        self.calls.append((name, source))


class Exited:
    """A host process that has exited with `returncode`."""

    def __init__(self, pid: int, returncode: int) -> None:
        self.pid, self.returncode = pid, returncode


def stack_with(monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[LocalStack, Spawns]:
    stack = LocalStack(StackOptions(project_root=ROOT, **options))  # not started: no AWS
    spawns = Spawns()
    monkeypatch.setattr(stack, "_spawn", spawns)
    return stack, spawns


def test_a_parameter_the_template_does_not_declare_is_refused() -> None:
    with pytest.raises(StackConfigError, match=r"no such parameter in template\.yaml: LeaseSecs"):
        LocalStack(StackOptions(project_root=ROOT, parameters={"LeaseSecs": "20"}))
    # a declared one is taken
    LocalStack(StackOptions(project_root=ROOT, parameters={"JobLeaseSeconds": "20"}))


def test_an_environment_override_replaces_the_templates_value_where_a_function_sets_it() -> None:
    with pytest.raises(StackConfigError, match=r"no function of template\.yaml sets NO_SUCH"):
        LocalStack(StackOptions(project_root=ROOT, environment={"NO_SUCH": "1"}))
    stack = LocalStack(
        StackOptions(project_root=ROOT, environment={"OUTPUTS_PURGE_DELAY_SECONDS": "30"})
    )
    stack.resources = resources_of(stack)
    assert stack.function_environment("FileRemovalsFunction")["OUTPUTS_PURGE_DELAY_SECONDS"] == "30"
    # a function the template does not give the variable is not given it
    assert "OUTPUTS_PURGE_DELAY_SECONDS" not in stack.function_environment("SweepFunction")


def test_function_workers_runs_that_many_sweeps_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    stack, spawns = stack_with(monkeypatch, workers_per_function={"SweepFunction": 2})
    stack._start_hosts("SweepFunction", stack.functions["SweepFunction"])
    assert spawns.calls == [("SweepFunction", "schedule")] * 2


def test_an_injected_crash_is_restarted_without_counting_towards_the_crash_loop_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack, spawns = stack_with(monkeypatch, faults='[{"kind": "crash", "probability": 0.05}]')

    def exits(code: int, count: int) -> list[bool]:
        restarted = []
        for pid in range(count):
            process: Any = Exited(pid, code)
            stack._hosts.append(process)
            stack._host_args[pid] = ("CompressionWorker", "sqs", ())
            restarted.append(stack._restart(process))
        return restarted

    # when a host crashes as injected, many times a minute, then it is always started again
    assert all(exits(CRASH_EXIT_CODE, 3 * RESTART_LIMIT))
    assert len(spawns.calls) == 3 * RESTART_LIMIT
    # and a host dying of anything else still counts: a crash loop stops the stack
    assert exits(1, RESTART_LIMIT + 1) == [True] * RESTART_LIMIT + [False]


def test_the_meter_log_reaches_every_host_as_an_absolute_path() -> None:
    # Given a stack asked to meter into a relative path
    relative = Path(".filejobs") / "meter.jsonl"
    stack = LocalStack(StackOptions(project_root=ROOT, meter_log=relative))

    # Then each host is told where to append (hosts run in other working directories)
    knobs = stack._local_knobs()
    assert knobs[METER_LOG_VARIABLE] == str(relative.resolve())
    # and a stack not asked to meter tells its hosts nothing
    assert METER_LOG_VARIABLE not in LocalStack(StackOptions(project_root=ROOT))._local_knobs()


# --- the definitions pipeline on the local stack ------------------------------------------------

needs_clamav = pytest.mark.skipif(
    shutil.which("freshclam") is None or shutil.which("clamscan") is None,
    reason="ClamAV is not installed (apt-get install clamav clamav-freshclam clamav-daemon)",
)


def project(tmp_path: Path) -> Path:
    """A project folder of its own: the stack writes its mirror under .filejobs/ there."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(ROOT / "template.yaml", root / "template.yaml")
    return root


def resources_of(stack: LocalStack, **parameters: str) -> Resources:
    """What provision() would have made, without an emulator: every resource named after itself."""
    declared = stack.template.get("Parameters", {})
    defaults = {name: str(spec["Default"]) for name, spec in declared.items() if "Default" in spec}
    names = {logical_id: logical_id.lower() for logical_id in stack.template["Resources"]}
    return Resources("local", "us-east-1", refs=names, parameters={**defaults, **parameters})


@needs_clamav
def test_the_clamav_layers_programs_are_this_machines() -> None:
    assert on_this_machine("/opt/clamav/bin/freshclam") == shutil.which("freshclam")
    assert on_this_machine("/opt/clamav/bin/clamscan") == shutil.which("clamscan")
    if Path("/usr/sbin/clamd").exists():  # Debian's clamd is not on a user's PATH
        assert on_this_machine("/opt/clamav/bin/clamd") in (
            "/usr/sbin/clamd",
            shutil.which("clamd"),
        )
    # a program this machine lacks keeps the layer's path: the function fails naming it
    assert on_this_machine("/opt/clamav/bin/no-such-program") == "/opt/clamav/bin/no-such-program"
    # and nothing else is touched
    for value in ("/opt/clamav/lib", "freshclam", "/opt/other/bin/freshclam", "signatures/"):
        assert on_this_machine(value) == value


@needs_clamav
def test_the_updaters_environment_names_this_machines_freshclam_and_clamscan() -> None:
    stack = LocalStack(StackOptions(project_root=ROOT))
    stack.resources = resources_of(stack)
    environment = stack.function_environment("DefinitionsUpdater")
    assert environment["FRESHCLAM"] == shutil.which("freshclam")
    assert environment["CLAMSCAN"] == shutil.which("clamscan")
    assert environment["SIGNATURES_BUCKET"] == "outputsbucket"


def test_the_definitions_schedule_is_its_parameters_rate() -> None:
    stack = LocalStack(StackOptions(project_root=ROOT))
    [schedule] = [
        p for kind, p in stack.functions["DefinitionsUpdater"].events if "Schedule" in kind
    ]
    assert schedule_interval(resources_of(stack), schedule) == 7200  # rate(2 hours)
    faster = resources_of(stack, DefinitionsUpdateSchedule="rate(5 minutes)")
    assert schedule_interval(faster, schedule) == 300
    assert schedule_interval(faster, schedule, every_seconds=2) == 2


def test_schedule_seconds_speeds_up_the_sweep_but_not_the_hourly_schedules() -> None:
    # --schedule-seconds 2 (demos, chaos runs) sweeps every 2 s; freshclam every 2 s would
    # be a load of its own, and the rescan policy reads an index each run
    stack = LocalStack(StackOptions(project_root=ROOT))
    resources = resources_of(stack)

    def schedule_of(function: str) -> dict[str, object]:
        [found] = [p for kind, p in stack.functions[function].events if "Schedule" in kind]
        return found

    assert schedule_interval(resources, schedule_of("SweepFunction"), every_seconds=2) == 2
    assert schedule_interval(resources, schedule_of("DefinitionsUpdater"), every_seconds=2) == 7200
    assert schedule_interval(resources, schedule_of("RescanPolicy"), every_seconds=2) == 3600


def test_the_updater_is_pointed_at_the_stacks_own_mirror(tmp_path: Path) -> None:
    # Given a project without a mirror folder yet
    root = project(tmp_path)
    stack = LocalStack(StackOptions(project_root=root))
    parameters = stack._start_mirror()
    try:
        # Then one is made with the local databases, and the parameters point at it alone
        assert stack._mirror is not None
        assert stack._mirror.directory == root / ".filejobs" / "mirror"
        assert sorted(p.name for p in stack._mirror.directory.iterdir()) == [
            "filejobs-local.hdb",
            "filejobs-local.ndb",
        ]
        url = stack._mirror.url
        assert parameters == {
            "DefinitionsMirror": url,
            "OfficialDatabases": "",
            "DefinitionsCustomUrls": f"{url}/filejobs-local.hdb,{url}/filejobs-local.ndb",
        }
    finally:
        assert stack._mirror is not None
        stack._mirror.stop()


def test_a_definitions_setting_of_the_user_leaves_all_of_them_to_the_user(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "house.ndb").write_text("House.Marker:0:*:484f555345\n")
    options = StackOptions(
        project_root=project(tmp_path),
        definitions_mirror=served,
        parameters={"DefinitionsMirror": "https://clamav-mirror.example.com"},
    )
    stack = LocalStack(options)
    try:
        assert stack._start_mirror() == {}
        assert stack._mirror is not None and stack._mirror.directory == served
        assert stack._mirror.database_urls() == [f"{stack._mirror.url}/house.ndb"]
    finally:
        assert stack._mirror is not None
        stack._mirror.stop()
    # and a mirror folder that does not exist stops the start
    with pytest.raises(StackConfigError, match=r"--definitions-mirror .*: no folder"):
        LocalStack(StackOptions(project_root=ROOT, definitions_mirror=tmp_path / "missing"))


def test_custom_resources_are_served_by_the_function_their_token_names() -> None:
    stack = LocalStack(StackOptions(project_root=ROOT))
    resource = stack.template["Resources"]["ScanDefinitionsOnDeploy"]
    assert service_function(resource) == "DefinitionsUpdater"
    assert service_function({"Properties": {"ServiceToken": {"Fn::GetAtt": ["F", "Arn"]}}}) == "F"
    assert service_function({"Properties": {"ServiceToken": "arn:aws:lambda:x"}}) is None
    assert service_function({"Properties": {"ServiceToken": {"Fn::GetAtt": "T.Name"}}}) is None


# A stand-in for the updater's process: it answers the request in its event file as told.
ANSWERING = """
import json, sys, urllib.request
event = json.loads(open(sys.argv[1]).read())
answer = {"Status": sys.argv[2], "Reason": sys.argv[3], "Data": {}}
request = urllib.request.Request(event["ResponseURL"], data=json.dumps(answer).encode(),
                                 method="PUT", headers={"Content-Type": ""})
urllib.request.urlopen(request, timeout=10).read()
"""


def stack_answering(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *answer: str) -> LocalStack:
    stack = LocalStack(StackOptions(project_root=project(tmp_path)))
    stack.resources = resources_of(stack)
    stack.config_path.parent.mkdir(parents=True)

    def command(function: str, event_path: Path) -> list[str]:
        if not answer:
            return [sys.executable, "-c", "import sys; sys.exit(3)"]
        return [sys.executable, "-c", ANSWERING, str(event_path), *answer]

    monkeypatch.setattr(stack, "invoke_command", command)
    return stack


def test_a_custom_resource_that_answers_success_lets_the_start_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = stack_answering(tmp_path, monkeypatch, "SUCCESS", "definitions published")
    stack._create_custom_resources()
    assert "ScanDefinitionsOnDeploy (Custom::ScanDefinitions) created by DefinitionsUpdater" in (
        capsys.readouterr().out
    )
    assert list(stack.config_path.parent.iterdir()) == []  # its event file is gone


def test_a_custom_resource_that_answers_failed_stops_the_start_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = stack_answering(tmp_path, monkeypatch, "FAILED", "bad configuration: weekly")
    with pytest.raises(StackStartError) as stopped:
        stack._create_custom_resources()
    assert str(stopped.value) == (
        "ScanDefinitionsOnDeploy (Custom::ScanDefinitions) failed: bad configuration: weekly"
    )


def test_a_custom_resource_whose_function_never_answers_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = stack_answering(tmp_path, monkeypatch)  # exits 3 without a word
    with pytest.raises(StackStartError, match=r"gave CloudFormation no answer \(exit status 3"):
        stack._create_custom_resources()


def put(url: str) -> int:
    request = urllib.request.Request(
        url, data=b'{"Status": "SUCCESS"}', method="PUT", headers={"Content-Type": ""}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_the_response_receiver_keeps_only_an_answer_to_its_own_url() -> None:
    with ResponseReceiver() as receiver:
        elsewhere = receiver.url.rsplit("/", 1)[0] + "/guessed"
        assert [put(elsewhere), put(receiver.url), put(receiver.url)] == [403, 200, 403]
        done: Any = Exited(0, 0)
        assert receiver.wait(done, timeout=1) == {"Status": "SUCCESS"}
