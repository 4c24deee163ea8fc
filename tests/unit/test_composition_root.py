"""One composition root: the environment is read in `config.py` alone, into typed settings that
`runtime.py` hands to the handlers and the processors. The guard below parses every module of
the runtime's tree and every handler, so an `os.environ` read anywhere else fails here, with its
file and line."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest

from filejobs.config import (
    ApiSettings,
    CallerSettings,
    ConfigurationError,
    OfficeSettings,
    ReconcilerSettings,
    RescanSettings,
    Settings,
    UpdaterVariables,
    inherited,
    powertools_names,
    started_by_lambda,
    worker_job_type,
)
from filejobs.domain.job import JobType
from filejobs.processors import office_runtime

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "layers/filejobs/filejobs"
COMPOSITION_ROOT = RUNTIME / "config.py"
# The one write to the environment that stays where it is: the decoders' zygote, confined in a
# process of its own, gives that process its own TMPDIR and HOME (libraries read them there).
WRITES = {RUNTIME / "processors/sandbox/zygote.py"}
TABLES = {"JOBS_TABLE_NAME": "jobs", "FILES_TABLE_NAME": "files"}


def environment_uses(source: str) -> list[tuple[int, str]]:
    """(line, "read" | "write") of each use of the process environment in `source`: `os.environ`
    and `os.environb` (a write only as the object of `.update(...)`, `[...] =` or `del`),
    `os.getenv`, `os.putenv`, and `environ` or `getenv` imported from os."""
    tree = ast.parse(source)
    written = _written_environments(tree)
    uses: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            if {alias.name for alias in node.names} & {"environ", "environb", "getenv"}:
                uses.append((node.lineno, "read"))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in {"environ", "environb", "getenv", "putenv"}
        ):
            kind = "write" if id(node) in written or node.attr == "putenv" else "read"
            uses.append((node.lineno, kind))
    return sorted(uses)


def _written_environments(tree: ast.AST) -> set[int]:
    """The `os.environ` nodes that are only written: `.update(...)`, `[k] = v`, `del [k]`."""
    written: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
        ):
            written.add(id(node.func.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            written.add(id(node.value))
    return written


def modules() -> list[Path]:
    return sorted([*RUNTIME.rglob("*.py"), *(ROOT / "functions").glob("*/app.py")])


def test_the_guard_finds_every_form_of_an_environment_read_and_tells_writes_apart() -> None:
    source = (
        "import os\n"
        "from os import environ\n"
        "a = os.environ.get('A')\n"
        "b = os.environ['B']\n"
        "c = os.getenv('C')\n"
        "d = dict(os.environ)\n"
        "os.environ.update(E='1')\n"
        "os.environ['F'] = '1'\n"
    )
    assert environment_uses(source) == [
        (2, "read"),
        (3, "read"),
        (4, "read"),
        (5, "read"),
        (6, "read"),
        (7, "write"),
        (8, "write"),
    ]


def test_no_module_but_config_reads_the_environment() -> None:
    assert COMPOSITION_ROOT in modules()
    found = [
        f"{path.relative_to(ROOT)}:{line} ({kind})"
        for path in modules()
        if path != COMPOSITION_ROOT
        for line, kind in environment_uses(path.read_text())
        if kind == "read" or path not in WRITES
    ]
    assert found == [], "read it in config.py, into typed settings that runtime.py passes in"


def test_the_zygote_s_write_is_still_there_to_be_excused() -> None:
    # an entry of WRITES that no longer writes would excuse whatever is written there next
    for path in WRITES:
        assert [kind for _, kind in environment_uses(path.read_text())] == ["write"]


# --- each function's settings: the template's variable names and defaults, unchanged ----------


def test_the_tables_region_is_lambda_s_then_botocore_s_then_us_east_1() -> None:
    assert Settings.from_env(TABLES).region == "us-east-1"
    assert Settings.from_env({**TABLES, "AWS_DEFAULT_REGION": "eu-west-1"}).region == "eu-west-1"
    both = {**TABLES, "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "ap-south-1"}
    assert Settings.from_env(both).region == "ap-south-1"


def test_a_worker_is_named_after_its_function_and_reads_its_job_type_and_sizes() -> None:
    assert Settings.from_env(TABLES).function_name == "worker"
    named = Settings.from_env({**TABLES, "AWS_LAMBDA_FUNCTION_NAME": "stack-ScanWorker"})
    assert named.function_name == "stack-ScanWorker"
    assert Settings.from_env(TABLES).thumbnail_sizes is None
    assert Settings.from_env({**TABLES, "THUMBNAIL_SIZES": "512"}).thumbnail_sizes == "512"
    assert worker_job_type({"JOB_TYPE": "virus_scan"}) is JobType.VIRUS_SCAN
    with pytest.raises(KeyError):
        worker_job_type({})


def test_only_lambda_s_own_variable_says_the_process_is_lambda_s() -> None:
    assert started_by_lambda({"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"})
    assert not started_by_lambda({"AWS_LAMBDA_INITIALIZATION_TYPE": ""})
    assert not started_by_lambda({})


def test_powertools_names_default_to_filejobs_when_unset_or_empty() -> None:
    assert powertools_names({}) == ("filejobs", "filejobs")
    assert powertools_names({"POWERTOOLS_SERVICE_NAME": ""}) == ("filejobs", "filejobs")
    named = {"POWERTOOLS_SERVICE_NAME": "jobs", "POWERTOOLS_METRICS_NAMESPACE": "filejobs/s"}
    assert powertools_names(named) == ("jobs", "filejobs/s")


def test_the_api_recognises_the_stack_s_roles_and_the_local_switch_only_when_both_are_on() -> None:
    assert CallerSettings.from_env({}) == CallerSettings()
    assert CallerSettings().operator_group == "operators"
    recognised = CallerSettings.from_env(
        {
            "API_OPERATOR_GROUP": "admins",
            "API_ACCOUNT_ID": "123456789012",
            "API_OPERATOR_ROLE": "op",
            "API_OPERATOR_ROLE_ID": "AROAOP",
            "API_TENANT_ROLE": "tenant",
            "API_TENANT_ROLE_ID": "AROATENANT",
            "AWS_SAM_LOCAL": "true",
            "FILEJOBS_LOCAL_CALLERS": "header",
        }
    )
    assert recognised == CallerSettings(
        operator_group="admins",
        account_id="123456789012",
        operator_role="op",
        operator_role_id="AROAOP",
        tenant_role="tenant",
        tenant_role_id="AROATENANT",
        local_callers=True,
    )
    assert not CallerSettings.from_env({"FILEJOBS_LOCAL_CALLERS": "header"}).local_callers


def test_the_api_s_origins_are_the_comma_separated_list_without_blanks() -> None:
    assert ApiSettings.from_env({}) == ApiSettings(allowed_origins=(), uploads_bucket=None)
    listed = ApiSettings.from_env(
        {"API_ALLOWED_ORIGINS": " https://a.example, ,https://b.example", "UPLOADS_BUCKET": "up"}
    )
    assert listed.allowed_origins == ("https://a.example", "https://b.example")
    assert listed.uploads_bucket == "up"


def test_the_reconciler_runs_every_15_minutes_with_2_minutes_grace_unless_set() -> None:
    assert ReconcilerSettings.from_env({}) == ReconcilerSettings(
        every=timedelta(minutes=15), grace=timedelta(seconds=120)
    )
    assert ReconcilerSettings.from_env(
        {"RECONCILE_EVERY_MINUTES": "2", "RECONCILE_GRACE_SECONDS": "0.5"}
    ) == ReconcilerSettings(every=timedelta(minutes=2), grace=timedelta(seconds=0.5))


def test_the_rescan_policy_is_off_unless_set_and_refuses_what_is_not_a_whole_number() -> None:
    assert RescanSettings.from_env({"RESCAN_AFTER_DAYS": ""}) == RescanSettings(
        older_than=None, definitions_before=None, per_run=500
    )
    policy = RescanSettings.from_env(
        {
            "RESCAN_AFTER_DAYS": "30",
            "RESCAN_MAX_PER_RUN": "20",
            "RESCAN_DEFINITIONS_BEFORE": " 2026-11-01 ",
        }
    )
    assert policy == RescanSettings(timedelta(days=30), "2026-11-01", 20)
    for wrong in ({"RESCAN_AFTER_DAYS": "-1"}, {"RESCAN_MAX_PER_RUN": "0"}):
        with pytest.raises(ConfigurationError, match="must be whole numbers"):
            RescanSettings.from_env(wrong)


def test_libreoffice_is_the_named_program_else_the_layer_at_its_default_place() -> None:
    assert OfficeSettings.from_env({}) == OfficeSettings(None, Path("/opt/libreoffice"))
    assert OfficeSettings.from_env({"FILEJOBS_SOFFICE": "/usr/bin/soffice"}).soffice == (
        "/usr/bin/soffice"
    )
    assert OfficeSettings.from_env({"FILEJOBS_LIBREOFFICE_LAYER": "/tmp/lo"}).layer == Path(
        "/tmp/lo"
    )


def test_the_definitions_updater_needs_its_bucket_and_checks_its_engines_and_numbers() -> None:
    bucket = {"SIGNATURES_BUCKET": "signatures"}
    assert UpdaterVariables.from_env(bucket) == UpdaterVariables(bucket="signatures")
    with pytest.raises(ConfigurationError, match="SIGNATURES_BUCKET is not set"):
        UpdaterVariables.from_env({})
    with pytest.raises(ConfigurationError, match="SCAN_ENGINES must be one of clamav"):
        UpdaterVariables.from_env({**bucket, "SCAN_ENGINES": "clamav"})
    with pytest.raises(ConfigurationError, match="DEFINITIONS_KEEP must be at least 1"):
        UpdaterVariables.from_env({**bucket, "DEFINITIONS_KEEP": "0"})
    yara = UpdaterVariables.from_env({**bucket, "SCAN_ENGINES": "yara"})
    assert not yara.uses_clamav


def test_a_program_started_inherits_only_the_variables_named() -> None:
    process = {"PATH": "/usr/bin", "AWS_SECRET_ACCESS_KEY": "secret", "TZ": "UTC"}
    assert inherited(["PATH", "TZ", "LANG"], process) == {"PATH": "/usr/bin", "TZ": "UTC"}


def test_the_office_settings_passed_in_are_the_ones_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FILEJOBS_SOFFICE", "/usr/bin/from-the-environment")
    passed = OfficeSettings(soffice="/opt/passed/soffice")
    assert office_runtime.soffice(passed).argv == ("/opt/passed/soffice",)
    # and with none passed, the function's own, read through config.py
    assert office_runtime.soffice().argv == ("/usr/bin/from-the-environment",)
