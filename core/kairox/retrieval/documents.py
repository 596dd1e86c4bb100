"""Documents going *into* a knowledge base, and the protocol of sources that accept them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import orjson

from kairox.support.errors import KairoxError


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
        return hashlib.sha256(_fingerprint_payload(self)).hexdigest()


# The fingerprint's JSON, one encoder for every document (json.dumps with options builds
# a new one per call).
_FINGERPRINT_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


def _fingerprint_payload(document: Document) -> bytes:
    """``[title, text, uri, metadata]`` as :data:`_FINGERPRINT_JSON` writes it, in UTF-8.

    A document without metadata (the common one) is written by orjson, five times faster:
    it writes every string :mod:`json` can encode byte for byte as :mod:`json` does with
    ``ensure_ascii=False``, and refuses a lone surrogate, which :mod:`json` then writes.
    """
    title, text, uri = document.title, document.text, document.uri
    if (
        not document.metadata
        and type(title) is str
        and type(text) is str
        and (uri is None or type(uri) is str)
    ):
        try:
            parts = (orjson.dumps(title), orjson.dumps(text), orjson.dumps(uri))
        except orjson.JSONEncodeError:
            pass
        else:
            return b"[" + b", ".join(parts) + b", {}]"
    payload = _FINGERPRINT_JSON.encode([title, text, uri, dict(document.metadata)])
    # surrogatepass: a lone surrogate (possible in str) must hash, not raise
    return payload.encode("utf-8", "surrogatepass")


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


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """One workspace chunk pushed to a remote vector store by ``kairox kb sync``.

    :param id: stable across runs (derived from workspace, path and chunk number), so a
        re-sync overwrites instead of duplicating.
    :param vector: the chunk's embedding (float32, L2-normalised), from the backend the
        knowledge base is configured with.
    :param text: the chunk text (stored remotely so hits can show it).
    :param metadata: ``path``, ``chunk``, ``start``, ``end``, ``workspace`` and
        ``fingerprint`` (the chunk-text hash plus the embedder name).
    """

    id: str
    vector: Sequence[float]
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class VectorSyncTarget(Protocol):
    """A remote vector store that ``kairox kb sync`` can push the workspace index into.

    ``embedding_backend`` names the backend whose vectors the store holds; sync refuses
    to push vectors of another model. Both calls are idempotent (same ids overwrite;
    deleting a missing id is not an error) and raise on failure, so sync can resume.
    """

    name: str
    embedding_backend: str

    def upsert_vectors(self, records: Sequence[VectorRecord]) -> None: ...

    def delete_vectors(self, ids: Sequence[str]) -> None: ...
