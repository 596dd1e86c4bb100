"""Import circles of a package, for a test that keeps it free of them (requires grimp).

A plugin's test::

    from kairox.testing.imports import import_cycles

    def test_the_package_has_no_import_circle():
        assert import_cycles("kairox_mine") == []

Imports inside functions count: a lazy import that closes a circle is still a circle.
Imports under ``TYPE_CHECKING`` do not: they are type hints, not dependencies. ``depth``
groups modules into parts (with ``depth=2``, ``kairox.memory.store`` belongs to
``kairox.memory``), so the modules of one subpackage importing each other are one part
and only the circles between parts are reported; without it every module is its own part.
"""

from __future__ import annotations

import sys

import grimp

__all__ = ["import_cycles", "import_graph"]


def import_graph(package: str) -> grimp.ImportGraph:
    """The imports among ``package``'s own modules (lazy ones in, type-only ones out)."""
    return grimp.build_graph(
        package,
        include_external_packages=False,
        exclude_type_checking_imports=True,
        cache_dir=None,
    )


def _part(module: str, depth: int | None) -> str:
    return module if depth is None else ".".join(module.split(".")[:depth])


def import_cycles(package: str | grimp.ImportGraph, *, depth: int | None = None) -> list[list[str]]:
    """The import circles of ``package`` (a name, or a graph from :func:`import_graph`):
    each strongly connected component of more than one part, sorted, in a sorted list
    (``[]``: none)."""
    graph = import_graph(package) if isinstance(package, str) else package
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        part = _part(module, depth)
        imported = {_part(m, depth) for m in graph.find_modules_directly_imported_by(module)}
        edges.setdefault(part, set()).update(imported - {part})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(part: str) -> None:  # Tarjan's algorithm
        index[part] = low[part] = len(index)
        stack.append(part)
        on_stack.add(part)
        for other in sorted(edges.get(part, ())):
            if other not in index:
                visit(other)
                low[part] = min(low[part], low[other])
            elif other in on_stack:
                low[part] = min(low[part], index[other])
        if low[part] == index[part]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == part:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges)))
    try:
        for part in sorted(edges):
            if part not in index:
                visit(part)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)
