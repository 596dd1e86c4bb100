"""The dependency graph: layers only import downwards, and no import circle exists, between
Kairox's parts nor between its modules.

The layer order lives in ``pyproject.toml`` (``[tool.importlinter]``, which ``lint-imports``
in ``make lint`` also checks); this test reads it from there and asks grimp, so it runs in
every ``pytest`` too. Type-only imports (under ``TYPE_CHECKING``) are not dependencies.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

from kairox.testing.imports import assert_no_import_cycles, import_cycles

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def contracts() -> list[dict]:
    """The layer contracts: Kairox's parts, then the layers inside some of them."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return [c for c in config["contracts"] if c["type"] == "layers"]


def contract() -> dict:
    """The contract over Kairox's parts (the top level of ``core/kairox``)."""
    (top,) = [c for c in contracts() if c["containers"] == ["kairox"]]
    return top


def layers(layer_contract: dict) -> list[grimp.Layer]:
    return [
        grimp.Layer(*(part.strip() for part in line.split("|")), independent=True)
        for line in layer_contract["layers"]
    ]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kairox", exclude_type_checking_imports=True, cache_dir=None)


def illegal(graph: grimp.ImportGraph) -> list[str]:
    found = []
    for layer_contract in contracts():
        found += graph.find_illegal_dependencies_for_layers(
            layers=layers(layer_contract), containers=set(layer_contract["containers"])
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


def test_no_import_circle_among_modules():
    # Finer than the parts: two modules of one package importing each other (even from
    # inside a function) are a circle too.
    assert_no_import_cycles("kairox")


def test_the_surfaces_reach_the_core_through_the_runtime_layer():
    # The order the platform promises: surfaces, then the Python API and the runtime (the
    # facade, sessions), then config and the plugin host, then the domain (workspace,
    # context, retrieval, memory), then the store, and the support helpers at the bottom.
    order = [line.replace(" ", "") for line in contract()["layers"]]
    position = {module: number for number, line in enumerate(order) for module in line.split("|")}
    assert position["cli"] < position["tui"] == position["web"] < position["api"]
    assert position["api"] < position["runtime"] < position["config"] < position["context"]
    assert position["config"] == position["plugin_host"]
    assert position["context"] == position["memory"] == position["retrieval"]
    assert position["retrieval"] < position["store"] < position["support"] == len(order) - 1


def test_the_layers_inside_the_runtime_and_the_store():
    inner = {
        c["containers"][0]: [line.replace(" ", "") for line in c["layers"]] for c in contracts()
    }
    assert inner["kairox.runtime"][0] == "facade"
    assert inner["kairox.runtime"][-1] == "session_compaction"
    assert inner["kairox.store"] == ["messages", "events", "event_types", "sqlite"]


def test_the_checks_catch_an_upward_import_and_a_circle():
    # The checks themselves can fail: the web app reaching into the CLI (what it once
    # did), the event types reaching up to messages, and a store -> facade import closing
    # a circle are all caught.
    graph = grimp.build_graph("kairox", exclude_type_checking_imports=True, cache_dir=None)
    graph.add_import(importer="kairox.web.app", imported="kairox.cli.memory_cmd")
    graph.add_import(importer="kairox.store.sqlite", imported="kairox.runtime.facade")
    graph.add_import(importer="kairox.store.event_types", imported="kairox.store.messages")
    assert "kairox.web -> kairox.cli" in illegal(graph)
    assert "kairox.store.event_types -> kairox.store.messages" in illegal(graph)
    assert any("kairox.store" in c and "kairox.runtime" in c for c in cycles(graph))


def test_the_circle_that_was_is_gone(graph):
    # config -> plugins (load_config's fallback) -> registry -> config closed a circle once.
    assert "kairox.plugin_host.manager" not in graph.find_modules_directly_imported_by(
        "kairox.config.schema"
    )
