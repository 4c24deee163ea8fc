"""Scripts the tests exercise that are no package's module (tools/, bench/, the ClamAV layer's
build script): each loaded by path, as a module of its own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The script at `path`, run once as module `name` (registered, as dataclasses look their
    module up while they are built)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
