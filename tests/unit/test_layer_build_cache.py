"""Specification: the layers are built by code outside what they ship, and `make deploy` never
deploys a layer an older builder made.

Every layer's ContentUri is layers/ (the runtime package, the requirements and Debian package
lists) and its Metadata.ContextPath infra/layers (the Makefile, debs.py, debian_packages.py).
SAM reuses a cached layer while the files of its ContentUri are unchanged: it never looks at the
builders. So tools/deploy.py gives `sam build` a cache folder per digest of infra/layers."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from filejobs_dev.infra.template import load_template, resources_of_type

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = runpy.run_path(str(ROOT / "tools" / "deploy.py"), run_name="deploy")
LAYER_BUILDERS: Path = DEPLOY["LAYER_BUILDERS"]
build_cache_dir = DEPLOY["build_cache_dir"]
build_arguments = DEPLOY["build_arguments"]
drop_other_caches = DEPLOY["drop_other_caches"]
Environment: Any = DEPLOY["Environment"]


def builders(tmp_path: Path) -> Path:
    folder = tmp_path / "builders"
    (folder / "clamav").mkdir(parents=True)
    (folder / "Makefile").write_text("build-FileJobsLayer:\n\ttrue\n")
    (folder / "clamav" / "debs.py").write_text("print('install')\n")
    return folder


def test_every_layer_ships_from_layers_and_is_built_by_the_builders_deploy_digests() -> None:
    layers = resources_of_type(load_template(), "AWS::Serverless::LayerVersion")
    assert layers
    for name, layer in layers.items():
        assert layer["Properties"]["ContentUri"] == "layers", name
        assert ROOT / layer["Metadata"]["ContextPath"] == LAYER_BUILDERS, name
    assert (LAYER_BUILDERS / "Makefile").is_file()
    # and layers/ holds what ships, no builder
    shipped = {p.relative_to(ROOT / "layers").as_posix() for p in (ROOT / "layers").rglob("*")}
    assert not {"Makefile", "debian_packages.py", "clamav/debs.py", "libreoffice/debs.py"} & shipped


def test_the_build_cache_folder_follows_the_builders(tmp_path: Path) -> None:
    folder = builders(tmp_path)
    first = build_cache_dir(folder, tmp_path / ".aws-sam")
    assert first.parent == tmp_path / ".aws-sam"
    assert first.name.startswith("cache-")
    # then unchanged builders keep the cache
    assert build_cache_dir(folder, tmp_path / ".aws-sam") == first
    # and compiled Python is no change
    (folder / "clamav" / "__pycache__").mkdir()
    (folder / "clamav" / "__pycache__" / "debs.cpython-313.pyc").write_bytes(b"\0")
    assert build_cache_dir(folder, tmp_path / ".aws-sam") == first
    # but a changed recipe, script or file name is a new cache: every layer is built again
    (folder / "Makefile").write_text("build-FileJobsLayer:\n\tfalse\n")
    changed = build_cache_dir(folder, tmp_path / ".aws-sam")
    assert changed != first
    (folder / "clamav" / "debs.py").rename(folder / "clamav" / "build.py")
    assert build_cache_dir(folder, tmp_path / ".aws-sam") not in {first, changed}


def test_sam_build_is_given_the_cache_folder() -> None:
    env = Environment(name="prod", stack_name="filejobs-prod", region=None, profile=None)
    cache = build_cache_dir()
    arguments = build_arguments(env, cache)
    assert arguments[:3] == ["build", "--config-env", "prod"]
    assert arguments[arguments.index("--cache-dir") + 1] == str(cache)


def test_the_caches_of_earlier_builders_are_dropped(tmp_path: Path) -> None:
    kept, older = tmp_path / "cache-aaaa", tmp_path / "cache-bbbb"
    for cache in (kept, older):
        (cache / "uuid").mkdir(parents=True)
    (tmp_path / "build").mkdir()
    drop_other_caches(kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "cache-aaaa"]
