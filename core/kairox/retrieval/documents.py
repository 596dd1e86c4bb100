"""Documents going *into* a knowledge base, and the protocol of sources that accept them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kairox.errors import KairoxError


@dataclass(frozen=True, slots=True)
class Document:
    """A document to index. ``id`` is stable: adding it again replaces the old copy."""

    id: str
    text: str
    title: str = ""
    uri: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """A hash of everything indexed, so unchanged documents can be skipped."""
        payload = json.dumps(
            [self.title, self.text, self.uri, dict(self.metadata)],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        # surrogatepass: a lone surrogate (possible in str) must hash, not raise
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class QueryError(KairoxError, ValueError):
    """A query the source cannot run, with a message that says why and what to change."""


@runtime_checkable
class IngestableSource(Protocol):
    """A knowledge base that ``kairox kb ingest`` can fill (sqlite-fts, tantivy, ...).

    ``fingerprints`` maps every stored id to the :attr:`Document.fingerprint` it was
    stored with, so ingestion re-writes only what changed. Writes are durable when the
    call returns; a crash part-way leaves each document either old or new, never torn.
    """

    name: str

    def upsert(self, documents: Sequence[Document]) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def fingerprints(self) -> dict[str, str]: ...
