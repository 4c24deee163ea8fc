"""Every Python layer ships exactly the releases its requirements.lock names, each file checked
against the sha256 there (infra/layers/Makefile installs with --require-hashes; `make locks`
writes the locks): a package index that serves other bytes fails the build instead of reaching
Lambda."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ROOT / "layers"
RECIPES = ROOT / "infra" / "layers" / "Makefile"
_RECIPE = re.compile(r"^build-\w+:\n\t\$\(call build_layer,(\w+)", re.M)
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)$")
_HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def python_layers() -> list[str]:
    return sorted(_RECIPE.findall(RECIPES.read_text()))


def locked(layer: str) -> dict[str, tuple[Version, list[str]]]:
    """name -> (version, hashes) of each entry of the layer's lock."""
    text = (LAYERS / layer / "requirements.lock").read_text()
    entries: dict[str, tuple[Version, list[str]]] = {}
    for entry in re.split(r"\n(?=\S)", text.replace("\\\n", " ")):
        lines = [line for line in entry.splitlines() if not line.strip().startswith("#")]
        if not lines:
            continue
        pin, *hashes = lines[0].split()
        match = _PIN.match(pin)
        assert match is not None, f"{layer}: {pin!r} is not pinned with =="
        entries[canonicalize_name(match["name"])] = (Version(match["version"]), hashes)
    return entries


def test_every_python_layer_is_built_from_its_lock_with_hashes_required() -> None:
    assert python_layers() == [
        "compression",
        "documents",
        "filejobs",
        "imaging",
        "scanning",
        "thumbnails",
        "video",
    ]
    recipe = RECIPES.read_text()
    assert "--require-hashes" in recipe
    assert "-r $(1)/requirements.lock" in recipe


@pytest.mark.parametrize("layer", python_layers())
def test_each_locked_release_is_pinned_with_the_hash_of_every_file(layer: str) -> None:
    entries = locked(layer)
    assert entries
    for name, (_, hashes) in entries.items():
        assert hashes, f"{layer}: {name} has no hash"
        assert all(_HASH.match(h) for h in hashes), f"{layer}: {name}: {hashes}"


@pytest.mark.parametrize("layer", python_layers())
def test_the_lock_holds_every_requirement_at_a_release_it_allows(layer: str) -> None:
    entries = locked(layer)
    lines = (LAYERS / layer / "requirements.txt").read_text().splitlines()
    for line in lines:
        text = line.split("#")[0].strip()
        if not text:
            continue
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in entries, f"{layer}: {name} is not locked: run make locks"
        version, _ = entries[name]
        assert version in requirement.specifier, f"{layer}: {name} {version} not {requirement}"


# Layers no function has together (tests/integration/test_template_resources.py checks the
# functions): the thumbnails layer is the imaging layer's Pillow and the thumbnailer's formats;
# the documents layer has zstandard, as the compression layer does, to unpack LibreOffice.
ALTERNATIVES = {frozenset({"imaging", "thumbnails"}), frozenset({"compression", "documents"})}


def test_no_release_is_in_two_layers_a_function_may_have_together() -> None:
    # Layers stack in one /opt/python: a package in two would shadow one copy with the other.
    owner: dict[str, str] = {}
    for layer in python_layers():
        for name in locked(layer):
            other = owner.get(name)
            together = other is not None and frozenset({other, layer}) not in ALTERNATIVES
            assert not together, f"{name} is locked in {other} and {layer}"
            owner[name] = layer


def test_the_thumbnails_layer_ships_the_pillow_the_imaging_layer_does() -> None:
    # the thumbnailer and the video and document functions decode with the same Pillow
    imaging, thumbnails = locked("imaging"), locked("thumbnails")
    for shared in ("pillow", "pi-heif"):
        assert thumbnails[shared] == imaging[shared], shared


def test_the_documents_layer_ships_the_zstandard_the_compression_layer_does() -> None:
    # one zstd library, one set of its bugs: the LibreOffice archive's and the compressed copies'
    assert locked("documents")["zstandard"] == locked("compression")["zstandard"]
