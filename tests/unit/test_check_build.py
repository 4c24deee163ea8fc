"""Specification: what tools/check_build.py refuses in a `sam build` (`make template` runs it):
dev tooling in what ships, and a function that cannot start from its code and layers alone."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from filejobs_dev.infra.template import FunctionSpec

CHECK = runpy.run_path(
    str(Path(__file__).resolve().parents[2] / "tools" / "check_build.py"), run_name="check_build"
)
dev_only_problems = CHECK["dev_only_problems"]
start_problem = CHECK["start_problem"]
unpacked_on_start = CHECK["unpacked_on_start"]
tmp_problem = CHECK["tmp_problem"]
TEMPLATE: dict[str, Any] = {"Parameters": {"RetentionDays": {"Default": 7}}, "Resources": {}}


def build_of(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def spec(layers: list[str], environment: dict[str, Any] | None = None) -> FunctionSpec:
    return FunctionSpec(
        code_uri="functions/x",
        handler="app.handler",
        environment=environment or {},
        timeout=3,
        memory=128,
        events=[],
        layers=layers,
    )


HANDLER = "import shared\n\ndef handler(event, context):\n    return shared.VALUE\n"


def test_a_layer_shipping_a_dev_only_library_is_refused(tmp_path: Path) -> None:
    build = build_of(tmp_path, {"Layer/python/moto/__init__.py": "", "Layer/python/ok.py": ""})
    assert dev_only_problems(build, "Layer") == ["Layer: ships moto, which only the dev tools use"]


def test_code_of_ours_importing_the_dev_tools_is_refused_even_lazily(tmp_path: Path) -> None:
    build = build_of(
        tmp_path,
        {
            "Layer/python/filejobs/__init__.py": "",
            "Layer/python/filejobs/stack.py": "def f():\n    from filejobs_dev.local import x\n",
            "Fn/app.py": "import yaml\n",
        },
    )
    assert dev_only_problems(build, "Layer") == ["Layer: filejobs/stack.py imports filejobs_dev"]
    assert dev_only_problems(build, "Fn") == ["Fn: app.py imports yaml"]


def test_a_library_a_distribution_ships_is_not_read_as_ours(tmp_path: Path) -> None:
    # pip's RECORD says the package is the distribution's: its optional imports are its own.
    build = build_of(
        tmp_path,
        {
            "Layer/python/lib/__init__.py": "def load():\n    import yaml\n",
            "Layer/python/lib-1.0.dist-info/RECORD": "lib/__init__.py,,\n",
        },
    )
    assert dev_only_problems(build, "Layer") == []


def test_a_function_starts_from_its_code_and_layers(tmp_path: Path) -> None:
    build = build_of(
        tmp_path,
        {
            "Fn/app.py": "import os\nimport shared\n\nSETTING = os.environ['RETENTION']\n"
            "def handler(event, context):\n    return shared.VALUE\n",
            "Layer/python/shared.py": "VALUE = 1\n",
        },
    )
    environment = {"RETENTION": {"Ref": "RetentionDays"}}
    assert start_problem(build, "Fn", spec(["Layer"], environment), TEMPLATE, []) is None


def test_a_module_the_layers_lack_fails_though_this_machine_has_it(tmp_path: Path) -> None:
    # boto3 is installed here, for the tests: the probe must not see it.
    build = build_of(
        tmp_path, {"Fn/app.py": "import boto3\n" + HANDLER, "Layer/python/shared.py": ""}
    )
    problem = start_problem(build, "Fn", spec(["Layer"]), TEMPLATE, [])
    assert problem is not None
    assert "ModuleNotFoundError: No module named 'boto3'" in problem


def test_a_worker_whose_processor_cannot_be_built_fails(tmp_path: Path) -> None:
    # the processor's media library is imported when the first record builds it, not at init
    build = build_of(
        tmp_path,
        {
            "Fn/app.py": HANDLER + "\ndef build_processor():\n    import PIL\n",
            "Layer/python/shared.py": "VALUE = 1\n",
        },
    )
    problem = start_problem(build, "Fn", spec(["Layer"]), TEMPLATE, [])
    assert problem is not None
    assert "No module named 'PIL'" in problem


def test_a_layer_unpacked_on_start_must_fit_the_function_s_tmp_with_room_for_a_file(
    tmp_path: Path,
) -> None:
    # given a layer whose archive unpacks to 350 MB, as the LibreOffice layer's manifest says
    build = build_of(tmp_path, {"Office/libreoffice/layer.json": '{"unpacked_bytes": 350000000}'})
    assert unpacked_on_start(build, "Office") == 350_000_000
    assert unpacked_on_start(build, "Plain") == 0
    # then Lambda's default 512 MB of /tmp is refused, naming the setting; 2048 MB holds it
    small = spec(["Office"])
    assert tmp_problem("Worker", small, 350_000_000) == (
        "Worker: unpacks 350.0 MB to /tmp, which its EphemeralStorage (512 MB) cannot hold "
        "with 512 MiB for a file"
    )
    large = FunctionSpec(**{**small.__dict__, "ephemeral_storage": 2048})
    assert tmp_problem("Worker", large, 350_000_000) is None
    assert tmp_problem("Worker", small, 0) is None
