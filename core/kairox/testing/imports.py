"""Import circles of a package, for a test that keeps it free of them (requires grimp,
which comes with import-linter in the ``test`` extra).

A plugin's test::

    from kairox.testing.imports import assert_no_import_cycles

    def test_the_package_has_no_import_circle():
        assert_no_import_cycles("kairox_mine")

Imports inside functions count: an import moved into a function to dodge a circle still
closes it, only later and at run time. Imports under ``TYPE_CHECKING`` do not: they are
type hints, not dependencies. ``depth`` groups modules into parts (with ``depth=2``,
``kairox.memory.store`` belongs to ``kairox.memory``), so the modules of one subpackage
importing each other are one part and only the circles between parts are reported;
without it every module is its own part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp

__all__ = ["assert_no_import_cycles", "import_cycles", "import_graph", "strongly_connected"]


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


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The circles of a directed graph: its strongly connected components of more than one
    node, each sorted, in sorted order (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def enter(node: str) -> tuple[str, Iterable[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return node, iter(sorted(edges.get(node, ())))

    for root in sorted(edges):
        if root in index:
            continue
        work = [enter(root)]
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    work.append(enter(target))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _edges(graph: grimp.ImportGraph, depth: int | None) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        part = _part(module, depth)
        imported = {_part(m, depth) for m in graph.find_modules_directly_imported_by(module)}
        edges.setdefault(part, set()).update(imported - {part})
    return edges


def import_cycles(package: str | grimp.ImportGraph, *, depth: int | None = None) -> list[list[str]]:
    """The import circles of ``package`` (a name, or a graph from :func:`import_graph`):
    each strongly connected component of more than one part, sorted, in a sorted list
    (``[]``: none)."""
    graph = import_graph(package) if isinstance(package, str) else package
    return strongly_connected(_edges(graph, depth))


def assert_no_import_cycles(package: str) -> None:
    """Fail naming each circle in ``package`` and the imports (file lines) that close it."""
    graph = import_graph(package)
    edges = _edges(graph, None)
    circles = strongly_connected(edges)
    if not circles:
        return
    lines = []
    for circle in circles:
        lines.append("circle: " + ", ".join(circle))
        members = set(circle)
        for importer in circle:
            for imported in sorted(edges[importer] & members):
                where = graph.get_import_details(importer=importer, imported=imported)
                at = ", ".join(f"line {d['line_number']}" for d in where)
                lines.append(f"  {importer} -> {imported} ({at})")
    raise AssertionError(
        f"import circles among {package}'s modules (move the piece both sides need to a "
        "module both can import):\n" + "\n".join(lines)
    )
