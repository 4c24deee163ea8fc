"""The domain's seams: pure Python that imports only the standard library and itself, with no
import circle among its modules (not even one hidden in a function or behind TYPE_CHECKING)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import filejobs.domain

DOMAIN = Path(filejobs.domain.__file__).parent
PACKAGE = "filejobs.domain"


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, wherever the import statement sits: `import a.b`, and
    `from a import b` as both `a` and `a.b` (b may be a module: `from filejobs.domain import
    transitions`; a caller keeps the names it knows as modules)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def domain_graph() -> dict[str, set[str]]:
    modules = {f"{PACKAGE}.{path.stem}": path for path in DOMAIN.glob("*.py")}
    return {
        name: {imported for imported in imports_of(path) if imported in modules}
        for name, path in modules.items()
    }


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as the path round it, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for imported in sorted(graph[node]):
            found = visit(imported, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    return next((c for node in sorted(graph) if (c := visit(node, [])) is not None), None)


def test_the_domain_imports_only_the_standard_library_and_itself() -> None:
    foreign = {
        f"{path.name}: {name}"
        for path in DOMAIN.glob("*.py")
        for name in imports_of(path)
        if not name.startswith(PACKAGE)
        and name.split(".")[0] not in sys.stdlib_module_names
        and name != "__future__"
    }
    assert foreign == set()


def test_the_domain_has_no_import_circle() -> None:
    assert cycle_in(domain_graph()) is None


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert cycle_in(graph) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None


def test_the_job_and_its_state_machine_import_one_way() -> None:
    graph = domain_graph()
    assert f"{PACKAGE}.transitions" in graph[f"{PACKAGE}.job"]
    assert f"{PACKAGE}.job" not in graph[f"{PACKAGE}.transitions"]
