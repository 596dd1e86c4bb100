"""Memory: the ``<memory>`` marker protocol and the scoped memory store.

The model proposes memories with ``<memory scope=... key=...>body</memory>`` markers in its
stream (:mod:`kairox.memory.markers`); approved memories live in a :class:`MemoryStore`
(:mod:`kairox.memory.base_store`), kept by :class:`SqliteMemoryStore` (:mod:`kairox.memory.store`)
in the event store's SQLite database, as :class:`MemoryRecord` (:mod:`kairox.memory.records`).
"""

from __future__ import annotations

from kairox.memory.base_store import MemoryStore
from kairox.memory.marker_rules import SCOPES_WIDEST_FIRST
from kairox.memory.markers import (
    KEY_MAX_LENGTH,
    SCOPES,
    ExtractionResult,
    MarkerExtractor,
    MemoryMarker,
    RejectedMarker,
    extract_memory_markers,
    normalize_key,
    recorded_reply,
)
from kairox.memory.records import STATUSES, MemoryRecord, Scope, Status
from kairox.memory.store import MEMORY_SCHEMA_VERSION, SqliteMemoryStore

__all__ = [
    "KEY_MAX_LENGTH",
    "MEMORY_SCHEMA_VERSION",
    "SCOPES",
    "SCOPES_WIDEST_FIRST",
    "STATUSES",
    "ExtractionResult",
    "MarkerExtractor",
    "MemoryMarker",
    "MemoryRecord",
    "MemoryStore",
    "RejectedMarker",
    "Scope",
    "SqliteMemoryStore",
    "Status",
    "extract_memory_markers",
    "normalize_key",
    "recorded_reply",
]
