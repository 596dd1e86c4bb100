"""``kairox.testing.imports``: the import circles of a package, lazy imports counted."""

from __future__ import annotations

import pytest

from kairox.testing.imports import import_cycles, import_graph

MODULES = {
    # a <-> b through an import inside a function: a circle all the same.
    "a.py": "from circled import b, c\n",
    "b.py": "def late():\n    from circled import a\n    return a\n",
    # c -> a only under TYPE_CHECKING (a -> c at run time): a type hint, not a circle.
    "c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circled import a\n"),
    "sub/__init__.py": "",
    "sub/one.py": "from circled.sub import two\n",
    "sub/two.py": "from circled.sub import one\n",
}


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An importable package ``circled`` with the modules of :data:`MODULES`."""
    root = tmp_path / "circled"
    for name, text in {"__init__.py": "", **MODULES}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "circled"


def test_a_lazy_import_that_closes_a_circle_is_found(package):
    assert import_cycles(package) == [
        ["circled.a", "circled.b"],
        ["circled.sub.one", "circled.sub.two"],
    ]


def test_a_subpackage_is_one_part_at_a_depth(package):
    # circled.sub's modules importing each other are one part: only a <-> b is left.
    assert import_cycles(package, depth=2) == [["circled.a", "circled.b"]]


def test_a_graph_can_be_changed_before_the_check(package):
    graph = import_graph(package)
    graph.remove_import(importer="circled.b", imported="circled.a")
    graph.add_import(importer="circled.c", imported="circled.sub.one")
    assert import_cycles(graph, depth=2) == []
    graph.add_import(importer="circled.sub.two", imported="circled.a")
    assert import_cycles(graph, depth=2) == [["circled.a", "circled.c", "circled.sub"]]
