"""What a memory is once stored: :class:`MemoryRecord`, its scope and status names, its slot.

Shared by every memory store and by everything that shows memories (the CLI, the TUI, the web
page, the context assembler); :mod:`kairox.memory.store` is where records are kept.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

__all__ = ["STATUSES", "MemoryRecord", "MemorySlot", "Scope", "Status"]

Scope = Literal["session", "user", "workspace"]
Status = Literal["pending", "approved", "rejected", "superseded"]
STATUSES: Final = ("pending", "approved", "rejected", "superseded")


@dataclass(frozen=True, slots=True)
class MemorySlot:
    """Where a memory lives: its scope, its key, and the workspace or session that bounds it.

    Two live (pending or approved) records of one status never share a slot: a new value
    for a taken slot supersedes the approved one (kept as ``superseded`` history) or replaces
    the pending one. Only the ids a scope is bounded by are set (see
    :func:`kairox.memory.base_store.place`).
    """

    scope: str
    key: str | None
    workspace_id: str | None
    session_id: str | None


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory or proposal."""

    id: int
    scope: str
    key: str | None
    body: str
    status: str
    """``pending``, ``approved`` (the current value of its key), ``rejected``, or
    ``superseded`` (an earlier value of its key, kept as history, never in a prompt)."""
    workspace_id: str | None
    """Set for workspace memories (and session memories whose workspace is known)."""
    session_id: str | None
    """Set for session memories only."""
    created_at: str
    updated_at: str
    approved_at: str | None
    """When a person approved (or wrote) it; ``None`` while pending or rejected, and for a
    session memory kept automatically."""
    valid_from: str | None = None
    """When this body became the key's current value; ``None`` until approved."""
    valid_to: str | None = None
    """When a newer value superseded this body; ``None`` while it is current."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where it came from: ``session_id``, ``workspace_id``, ``event_id``/``turn_id``,
    ``injection_warning``."""

    @property
    def slot(self) -> MemorySlot:
        """The scope, key and bounding ids this record occupies."""
        return MemorySlot(self.scope, self.key, self.workspace_id, self.session_id)

    @property
    def injection_warning(self) -> bool:
        """The proposing turn's prompt held unvetted text, so this may be prompt injection."""
        return bool(self.provenance.get("injection_warning", False))

    @property
    def tainted_by(self) -> list[str]:
        """What tainted the proposing turn (``tool output``, ``workspace:<source>``,
        ``knowledge_base:<id>``); records from before sources were named say ``tool output``."""
        named = self.provenance.get("tainted_by")
        if isinstance(named, list) and named:
            return [str(n) for n in named]
        return ["tool output"] if self.injection_warning else []

    def as_json(self) -> dict[str, Any]:
        """The record as the CLI's ``--json`` and the web API show it: every field, then the
        injection warning and what tainted it, then the provenance they are read from."""
        shown = asdict(self)
        provenance = shown.pop("provenance")
        return {
            **shown,
            "injection_warning": self.injection_warning,
            "tainted_by": self.tainted_by,
            "provenance": provenance,
        }
