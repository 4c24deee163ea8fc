"""The processors' seams: no import circle among their modules (an import inside a function
counts: it is a circle that only moved to run time), and the value types they share with the
ports live in the domain, so the ports and the domain load no processor and no adapter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import filejobs.processors
from tests.unit.test_domain_boundaries import cycle_in, imports_of

PROCESSORS = Path(filejobs.processors.__file__).parent
PACKAGE = "filejobs.processors"


def module_name(path: Path) -> str:
    parts = path.relative_to(PROCESSORS).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def processors_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PROCESSORS.rglob("*.py")}
    known = set(paths)
    return {name: (imports_of(path) & known) - {name} for name, path in paths.items()}


def test_the_processors_have_no_import_circle() -> None:
    assert cycle_in(processors_graph()) is None


def test_the_graph_holds_the_imports_made_inside_functions() -> None:
    # the document preview imports the office converter only when it meets an office document
    graph = processors_graph()
    assert "filejobs.processors.office" in graph["filejobs.processors.document"]
    # and both render a PDF's first page with the one module that does it
    assert "filejobs.processors.pdf_page" in graph["filejobs.processors.office"]
    assert "filejobs.processors.pdf_page" in graph["filejobs.processors.document"]
    assert "filejobs.processors.document" not in graph["filejobs.processors.office"]


def test_the_circle_check_sees_the_circle_the_office_converter_once_closed() -> None:
    graph = processors_graph()
    graph["filejobs.processors.office"].add("filejobs.processors.document")
    assert cycle_in(graph) is not None


def loaded_by(module: str) -> list[str]:
    """The filejobs.processors and filejobs.adapters modules that importing `module` loads, in
    a fresh interpreter."""
    code = (
        f"import sys, {module}\n"
        "print('\\n'.join(sorted(m for m in sys.modules "
        "if m.startswith(('filejobs.processors', 'filejobs.adapters')))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.split()


def test_the_ports_and_the_object_location_load_no_processor_and_no_adapter() -> None:
    assert loaded_by("filejobs.ports") == []
    assert loaded_by("filejobs.domain.objects") == []
