"""The dependency graph: layers only import downwards, and no runtime import circle exists
between Kairox's parts.

The layer order lives in ``pyproject.toml`` (``[tool.importlinter]``, which ``lint-imports``
in ``make lint`` also checks); this test reads it from there and asks grimp, so it runs in
every ``pytest`` too. Type-only imports (under ``TYPE_CHECKING``) are not dependencies.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

from kairox.testing.imports import import_cycles

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def contract() -> dict:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return layers


def layers() -> list[grimp.Layer]:
    return [
        grimp.Layer(*(part.strip() for part in line.split("|")), independent=True)
        for line in contract()["layers"]
    ]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kairox", exclude_type_checking_imports=True, cache_dir=None)


def illegal(graph: grimp.ImportGraph) -> list[str]:
    found = graph.find_illegal_dependencies_for_layers(
        layers=layers(), containers=set(contract()["containers"])
    )
    return sorted(f"{d.importer} -> {d.imported}" for d in found)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Circles between Kairox's parts (modules and subpackages), lazy imports included. A
    subpackage whose own modules import each other is one part."""
    return import_cycles(graph, depth=2)


def test_every_layer_imports_only_from_layers_below(graph):
    assert illegal(graph) == []


def test_no_runtime_import_circle(graph):
    assert cycles(graph) == []


def test_the_surfaces_reach_the_core_through_the_facade_layer():
    # The order the platform promises: surfaces, then the facade, then the domain
    # (session, context, retrieval, memory), then storage at the bottom.
    order = [line.replace(" ", "") for line in contract()["layers"]]
    position = {module: number for number, line in enumerate(order) for module in line.split("|")}
    assert position["cli"] < position["tui"] == position["web"] < position["facade"]
    assert position["facade"] < position["session"] < position["context"]
    assert position["context"] == position["memory"] == position["retrieval"]
    assert position["retrieval"] < position["storage"] == len(order) - 1


def test_the_checks_catch_an_upward_import_and_a_circle():
    # The checks themselves can fail: the web app reaching into the CLI (what it once
    # did) and a storage -> facade import closing a circle are both caught.
    graph = grimp.build_graph("kairox", exclude_type_checking_imports=True, cache_dir=None)
    graph.add_import(importer="kairox.web.app", imported="kairox.cli.memory_cmd")
    graph.add_import(importer="kairox.store.sqlite", imported="kairox.runtime.facade")
    assert "kairox.web -> kairox.cli" in illegal(graph)
    assert any("kairox.store.sqlite" in c and "kairox.runtime.facade" in c for c in cycles(graph))


def test_the_circle_that_was_is_gone(graph):
    # config -> plugins (load_config's fallback) -> registry -> config closed a circle once.
    assert "kairox.plugin_host.manager" not in graph.find_modules_directly_imported_by(
        "kairox.config.schema"
    )
