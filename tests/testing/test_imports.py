"""``kairox.testing.imports``: the import circles of a package, lazy imports counted."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from kairox.testing.imports import (
    assert_no_import_cycles,
    import_cycles,
    import_graph,
    strongly_connected,
)

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


def test_a_chain_has_no_circle_and_a_loop_is_one():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_two_separate_circles_are_two_and_a_self_import_is_none():
    edges = {"a": {"b", "a"}, "b": {"a"}, "c": {"d"}, "d": {"c", "e"}, "e": set()}
    assert strongly_connected(edges) == [["a", "b"], ["c", "d"]]


def test_a_long_chain_needs_no_recursion():
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)}
    chain["m5000"] = {"m0"}
    (circle,) = strongly_connected(chain)
    assert len(circle) == 5001


@pytest.fixture
def circular(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package on sys.path whose ``parse`` and ``text`` import each other, ``text``
    only inside a function (the dodge the check must see through)."""
    root = tmp_path / "circular_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "parse.py").write_text("from circular_pkg.text import parse_text\n")
    (root / "text.py").write_text(
        textwrap.dedent(
            """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from circular_pkg import typing_only


            def parse_text():
                from circular_pkg.parse import parse_text as again

                return again
            """
        )
    )
    (root / "typing_only.py").write_text("import circular_pkg.text\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "circular_pkg"
    for name in [m for m in sys.modules if m.startswith("circular_pkg")]:
        del sys.modules[name]


def test_the_assertion_names_the_lines_that_close_a_circle(circular):
    # typing_only -> text is a real import, but text -> typing_only is a type hint only:
    # no circle there.
    assert import_cycles(circular) == [["circular_pkg.parse", "circular_pkg.text"]]
    with pytest.raises(AssertionError) as failure:
        assert_no_import_cycles(circular)
    message = str(failure.value)
    assert "circular_pkg.text -> circular_pkg.parse (line 9)" in message
    assert "typing_only" not in message


def test_kairox_itself_has_no_circle():
    assert_no_import_cycles("kairox")
