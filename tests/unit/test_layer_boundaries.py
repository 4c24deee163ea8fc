"""The layers' seams: the services and the ports they depend on know no storage and no AWS SDK
(the data access and the adapters implement the ports), and each port is defined once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import filejobs
import filejobs.ports
import filejobs.services
from tests.unit.test_domain_boundaries import imports_of

PACKAGE = Path(filejobs.__file__).parent
SERVICES = Path(filejobs.services.__file__).parent
PORTS = Path(filejobs.ports.__file__)
# Storage and AWS: what only data/, adapters/ and the handlers' wiring (runtime.py) may import.
STORAGE = ("filejobs.data", "filejobs.adapters", "filejobs.runtime")
AWS_SDK = ("boto3", "botocore", "pynamodb", "mypy_boto3_")


def forbidden(name: str) -> bool:
    return name.startswith(STORAGE) or name.split(".", maxsplit=1)[0].startswith(AWS_SDK)


def test_the_services_and_ports_import_no_storage_and_no_aws_sdk() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in [PORTS, *SERVICES.glob("*.py")]
        for name in imports_of(path)
        if forbidden(name)
    }
    assert found == set()


def test_the_check_sees_an_import_hidden_in_a_function(tmp_path: Path) -> None:
    module = tmp_path / "use_case.py"
    module.write_text("def run():\n    from filejobs.data.job_repository import JobRepository\n")
    assert any(forbidden(name) for name in imports_of(module))


def test_loading_every_service_loads_no_aws_sdk() -> None:
    # What the services pull in through the domain and the processors counts too.
    probe = (
        "import importlib, pkgutil, sys\n"
        "import filejobs.services as services\n"
        "for found in pkgutil.iter_modules(services.__path__):\n"
        "    importlib.import_module(f'filejobs.services.{found.name}')\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0].startswith({AWS_SDK!r})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def port_names() -> set[str]:
    tree = ast.parse(PORTS.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(base, ast.Name) and base.id == "Protocol" for base in node.bases)
    }


def test_each_port_is_defined_once() -> None:
    ports = port_names()
    assert {"JobStore", "FileStore", "Dispatcher", "EventPublisher", "ObjectStore"} <= ports
    elsewhere = {
        f"{path.relative_to(PACKAGE)}: {node.name}"
        for path in PACKAGE.rglob("*.py")
        if path != PORTS
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name in ports
    }
    assert elsewhere == set()
