"""Which workspace a command works on, and why: one line on stderr (or a JSON field), and
a pointer to an indexed workspace nearby when the chosen root holds no index."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.cli.app import console_err
from kairox.support.terminal import printable
from kairox.workspace.index_types import NOT_INDEXED

if TYPE_CHECKING:
    from kairox.retrieval import RetrievalResult
    from kairox.runtime.facade import AppFacade

__all__ = ["indexed_nearby", "not_indexed_note", "root_json", "say_root"]


def say_root(facade: AppFacade) -> None:
    """``workspace: /x/y (the folder given)`` on stderr."""
    line = f"workspace: {facade.workspace_root} ({facade.workspace_root_why})"
    console_err.print(printable(line), markup=False, highlight=False)


def root_json(facade: AppFacade, nearby: list[Path] | None = None) -> dict[str, Any]:
    """The root and why, for a command's ``--json`` output."""
    found: dict[str, Any] = {"root": str(facade.workspace_root), "why": facade.workspace_root_why}
    if nearby:
        found["indexed_nearby"] = [str(p) for p in nearby]
    return found


def indexed_nearby(facade: AppFacade, result: RetrievalResult) -> list[Path]:
    """Indexed workspaces inside or above the root, when the search found no index here."""
    if not any(report.error == NOT_INDEXED for report in result.reports):
        return []
    return facade.indexed_neighbours()


def not_indexed_note(facade: AppFacade, nearby: list[Path], query: str) -> None:
    """Say on stderr that the root holds no index, and how to search the ones nearby."""
    if not nearby:
        return
    root, why = facade.workspace_root, facade.workspace_root_why
    lines = [f"no index for {root} ({why}), but {len(nearby)} workspace(s) nearby are indexed:"]
    quoted = query.replace("'", "'\\''")
    lines += [f"  kairox search --workspace {p} '{quoted}'" for p in nearby]
    lines.append(f"or index this one: kairox index {root}")
    for line in lines:
        console_err.print(printable(line), markup=False, highlight=False)
