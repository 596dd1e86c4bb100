"""The Pinecone source: a Kairox retriever (and sync target) over one Pinecone index.

Everything that talks to Pinecone goes through the official SDK's REST data plane
(``pinecone.Index``), which is imported on first use, never when this module is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import numpy as np

from kairox.retrieval import Hit, Query, ScoreKind, VectorRecord
from kairox.support.retry import RetryPolicy, call_with_retries
from kairox_pinecone.errors import (
    PineconeConfigurationError,
    PineconeSourceError,
    PineconeTimeoutError,
    _is_sdk_error,
    _retry_after,
    _sdk_problem,
    _status,
    _switch_off_sdk_retries,
    load_pinecone,
    translate,
)
from kairox_pinecone.filters import NO_MATCH, SUPPORT, compile_filter, merge_filters

if TYPE_CHECKING:
    from kairox.retrieval.embedding import EmbeddingBackend

__all__ = [
    "DELETE_BATCH",
    "ID_METADATA_KEY",
    "MAX_TOP_K",
    "UPSERT_BATCH",
    "WRITE_POLICY",
    "PineconeSource",
    "remote_id",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Vectors per upsert request (Pinecone's recommended batch; its hard cap is 1,000 or 2 MB).
UPSERT_BATCH = 100
#: Ids per delete request (Pinecone's cap).
DELETE_BATCH = 1000
#: Pinecone's top_k cap when metadata is included in the matches.
MAX_TOP_K = 1000
#: The metadata key that keeps a Kairox id Pinecone cannot store verbatim (see remote_id).
ID_METADATA_KEY = "kairox_id"
#: Retries for writes (``kairox kb sync``): no query deadline applies, so be patient.
WRITE_POLICY = RetryPolicy(attempts=6, base_delay=0.25, max_delay=20.0, budget=120.0)
#: The longest one write request may take.
WRITE_REQUEST_TIMEOUT = 30.0

_MAX_ID_LENGTH = 512
_ID_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")
_ACCEPTED_METRICS = ("cosine", "dotproduct")


# -- errors -----------------------------------------------------------------------------


# -- the SDK, loaded on first use -------------------------------------------------------


# -- ids ------------------------------------------------------------------------------


def remote_id(kairox_id: str) -> str:
    """The id a Kairox record is stored under in Pinecone.

    Pinecone ids are 1-512 ASCII characters without NUL. An id that already is one is
    used as it is; any other (a workspace path with ``é`` in it, say) is percent-encoded,
    and cut to 512 characters with a hash of the whole id when still too long. The
    original id then travels in the vector's metadata (``kairox_id``), so hits report it.
    """
    if (
        kairox_id
        and kairox_id.isascii()
        and "\x00" not in kairox_id
        and len(kairox_id) <= _MAX_ID_LENGTH
    ):
        return kairox_id
    encoded = quote(kairox_id, safe=_ID_SAFE, errors="surrogatepass")
    if encoded and len(encoded) <= _MAX_ID_LENGTH:
        return encoded
    digest = hashlib.sha256(kairox_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{encoded[: _MAX_ID_LENGTH - 33]}~{digest}"


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _plain(value: Any) -> Any:
    """Metadata values as JSON-ready Python values (numpy scalars and tuples included)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


# -- the source -------------------------------------------------------------------------


class PineconeSource:
    """One Pinecone index (one namespace of it) as a Kairox knowledge base.

    A :class:`kairox.retrieval.Source` (``retrieve``; dense, so it has an
    ``embedder`` and takes the query vector from ``query.embeddings``) and a
    :class:`kairox.retrieval.VectorSyncTarget` (``upsert_vectors``, ``delete_vectors``).

    :param name: the knowledge base id.
    :param host: the index host (``https://NAME-PROJECT.svc.REGION.pinecone.io``; a bare
        host means https; ``http://`` is used as given, for local stand-ins).
    :param embedder: the embedding backend that filled the index.
    :param embedding_backend: that backend's registered name (``hashing``, ``minilm``).
    :param namespace: the namespace to search and write; ``None`` or ``""`` is the
        index's default namespace.
    :param api_key_env: the environment variable holding the API key.
    :param text_field: the metadata field holding each passage's text.
    :param filter: a static Pinecone metadata filter AND-ed with every query's filters.
    :param timeout_ms: the deadline of one retrieval; retries fit inside it.
    :param read_policy: retries for queries (default: ``RetryPolicy.within(timeout_ms)``).
    :param write_policy: retries for upserts and deletes (default :data:`WRITE_POLICY`).
    """

    score_kind = ScoreKind.COSINE
    filter_support = SUPPORT

    def __init__(
        self,
        name: str,
        *,
        host: str,
        embedder: EmbeddingBackend,
        embedding_backend: str,
        namespace: str | None = None,
        api_key_env: str = "PINECONE_API_KEY",
        text_field: str = "text",
        filter: Mapping[str, Any] | None = None,
        timeout_ms: int = 800,
        read_policy: RetryPolicy | None = None,
        write_policy: RetryPolicy | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.embedder = embedder
        self.embedding_backend = embedding_backend
        self.namespace = namespace or ""
        self.api_key_env = api_key_env
        self.text_field = text_field
        self.filter = dict(filter) if filter else None
        self.timeout_ms = timeout_ms
        self.read_policy = read_policy or RetryPolicy.within(timeout_ms)
        self.write_policy = write_policy or WRITE_POLICY
        self._index: Any = None
        self._index_lock = threading.Lock()
        self._checked_lock = threading.Lock()
        self._checked = False

    def __repr__(self) -> str:
        return f"PineconeSource({self.name!r}, host={self.host!r}, namespace={self.namespace!r})"

    @property
    def _where(self) -> str:
        where = f"the Pinecone index at {self.host}"
        return f"{where} (namespace {self.namespace!r})" if self.namespace else where

    # -- setup -------------------------------------------------------------------------

    def unavailable_reason(self) -> str | None:
        """Why this source cannot be asked at all (reported as ``skipped``), or ``None``."""
        if not os.environ.get(self.api_key_env, "").strip():
            return self._missing_key_message()
        return _sdk_problem()

    def _missing_key_message(self) -> str:
        return (
            f"knowledge base {self.name!r}: the environment variable {self.api_key_env} "
            f"is not set, so there is no Pinecone API key. Set {self.api_key_env} to your "
            "Pinecone API key, or set api_key_env to the variable that holds it."
        )

    def _client(self) -> Any:
        """The SDK's ``Index`` for this host, created on first use."""
        with self._index_lock:
            if self._index is None:
                api_key = os.environ.get(self.api_key_env, "").strip()
                if not api_key:
                    raise PineconeConfigurationError(self._missing_key_message())
                pinecone = load_pinecone()
                try:
                    index = pinecone.Index(
                        host=self.host,
                        api_key=api_key,
                        timeout=WRITE_REQUEST_TIMEOUT,
                        source_tag="kairox",
                    )
                except ValueError as exc:
                    raise PineconeConfigurationError(
                        f"knowledge base {self.name!r}: host {self.host!r} is not a Pinecone "
                        f"index host ({exc}). Use the index's host from the Pinecone console, "
                        "e.g. https://NAME-PROJECT.svc.REGION.pinecone.io"
                    ) from exc
                _switch_off_sdk_retries(index)
                self._index = index
            return self._index

    def close(self) -> None:
        """Close the SDK client's connections (a later call opens new ones)."""
        with self._index_lock:
            index, self._index = self._index, None
        if index is not None:
            with contextlib.suppress(Exception):
                index.close()

    def _check_index(self, index: Any, timeout: float) -> None:
        """Once per source: the index's dimension and metric must fit the embedder."""
        if self._checked:
            return
        with self._checked_lock:
            if self._checked:
                return
            stats = index.describe_index_stats(timeout=timeout)
            dimension = getattr(stats, "dimension", None)
            if dimension is not None and dimension != self.embedder.dim:
                raise PineconeConfigurationError(
                    f"knowledge base {self.name!r}: the index at {self.host} has dimension "
                    f"{dimension} but embedding backend {self.embedding_backend!r} makes "
                    f"{self.embedder.dim}-dim vectors; set embedding_backend to the model "
                    "that filled the index"
                )
            metric = getattr(stats, "metric", None)
            if metric and str(metric).lower() not in _ACCEPTED_METRICS:
                raise PineconeConfigurationError(
                    f"knowledge base {self.name!r}: the index at {self.host} uses the "
                    f"{metric!r} metric; kairox-pinecone reads scores as cosine similarity, "
                    "so it needs an index created with metric 'cosine' (or 'dotproduct' "
                    "over normalised vectors)"
                )
            self._checked = True

    # -- calling Pinecone ------------------------------------------------------------

    def _remaining(self, started: float, policy: RetryPolicy, cap: float | None = None) -> float:
        left = policy.budget - (time.monotonic() - started)
        if left <= 0.001:
            raise PineconeTimeoutError(
                f"knowledge base {self.name!r}: no answer from {self._where} within "
                f"{policy.budget * 1000:.0f} ms"
            )
        return left if cap is None else min(left, cap)

    def _call(self, what: str, attempt: Callable[[], T], policy: RetryPolicy, *, write: bool) -> T:
        """``attempt()`` under ``policy``: 429, 408 and 5xx are retried (honouring
        ``Retry-After``), so are dropped connections for writes; SDK errors become
        :class:`PineconeSourceError` subclasses with a message that says what to do."""
        attempts = 0

        def counted() -> T:
            nonlocal attempts
            attempts += 1
            return attempt()

        def retryable(exc: Exception) -> bool:
            status = _status(exc)
            if status is not None:
                return status in (408, 429) or 500 <= status <= 599
            return write and _is_sdk_error(exc, "PineconeConnectionError")

        try:
            return call_with_retries(
                counted, retryable=retryable, policy=policy, retry_after=_retry_after
            )
        except (PineconeSourceError, ImportError):
            raise
        except Exception as exc:
            translated = translate(
                exc,
                f"knowledge base {self.name!r}",
                where=self._where,
                host=self.host,
                api_key_env=self.api_key_env,
                what=what,
                attempts=attempts,
            )
            if translated is None:
                raise
            raise translated from exc

    # -- Source ------------------------------------------------------------------------

    def _query_vector(self, query: Query) -> list[float] | None:
        vector = query.embeddings.get(self.embedder.name)
        if vector is None:
            vector = self.embedder.embed([query.embed_text or query.text])[0]
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if array.shape[0] != self.embedder.dim:
            raise PineconeConfigurationError(
                f"knowledge base {self.name!r}: the query vector for backend "
                f"{self.embedder.name!r} has {array.shape[0]} dimensions, expected "
                f"{self.embedder.dim}"
            )
        if not np.isfinite(array).all() or not array.any():
            return None  # nothing to compare by cosine (no features in the text)
        return array.tolist()

    def _search(self, query: Query) -> list[Hit]:
        if not query.text.strip():
            return []
        SUPPORT.check(self.name, query.filter)
        query_filter = compile_filter(query.filter)
        if query_filter is NO_MATCH:
            return []
        combined = merge_filters(self.filter, query_filter)
        vector = self._query_vector(query)
        if vector is None:
            return []
        policy = self.read_policy
        started = time.monotonic()

        def attempt() -> Any:
            index = self._client()
            self._check_index(index, self._remaining(started, policy))
            return index.query(
                vector=vector,
                top_k=min(query.k, MAX_TOP_K),
                namespace=self.namespace,
                filter=combined,
                include_metadata=True,
                timeout=self._remaining(started, policy),
            )

        response = self._call("query", attempt, policy, write=False)
        hits: list[Hit] = []
        seen: set[str] = set()
        for match in response.matches:
            score = float(match.score)
            if not math.isfinite(score) or score <= 0:
                continue  # no similarity at all, as in Kairox's own dense search
            hit = self._hit(match.id, score, match.metadata)
            if hit.id not in seen:
                seen.add(hit.id)
                hits.append(hit)
        hits.sort(key=lambda hit: -hit.score)
        return hits[: query.k]

    def _hit(self, vector_id: str, score: float, metadata: Mapping[str, Any] | None) -> Hit:
        rest = dict(metadata or {})
        text = rest.pop(self.text_field, None)
        if not isinstance(text, str):
            found = "has no metadata field" if text is None else "has a non-text metadata field"
            raise PineconeConfigurationError(
                f"knowledge base {self.name!r}: vector {vector_id!r} in {self._where} "
                f"{found} {self.text_field!r} (text_field). Set text_field to the metadata "
                "field that holds each passage's text."
            )
        original = rest.pop(ID_METADATA_KEY, None)
        uri = rest.pop("uri", None)
        if uri is None:
            uri = rest.get("path")
        return Hit(
            id=original if isinstance(original, str) else vector_id,
            text=text,
            score=score,
            source=self.name,
            uri=None if uri is None else str(uri),
            metadata=rest,
        )

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)

    # -- VectorSyncTarget --------------------------------------------------------------

    def _write(self, what: str, send: Callable[[Any, float], Any]) -> None:
        policy = self.write_policy
        started = time.monotonic()

        def attempt() -> Any:
            index = self._client()
            timeout = self._remaining(started, policy, WRITE_REQUEST_TIMEOUT)
            if what == "upsert":
                self._check_index(index, timeout)
            return send(index, timeout)

        self._call(what, attempt, policy, write=True)

    def _pinecone_vector(self, record: VectorRecord) -> dict[str, Any] | None:
        values = np.asarray(record.vector, dtype=np.float32).reshape(-1)
        if values.shape[0] != self.embedder.dim:
            raise ValueError(
                f"knowledge base {self.name!r}: record {record.id!r} has a "
                f"{values.shape[0]}-dim vector; embedding backend "
                f"{self.embedding_backend!r} makes {self.embedder.dim}-dim vectors"
            )
        if not np.isfinite(values).all():
            raise ValueError(f"knowledge base {self.name!r}: record {record.id!r} has NaN/inf")
        if not values.any():
            return None  # Pinecone refuses all-zero dense vectors; cosine cannot rank them
        metadata = {
            key: _plain(value) for key, value in record.metadata.items() if value is not None
        }
        metadata[self.text_field] = record.text
        vector_id = remote_id(record.id)
        if vector_id != record.id:
            metadata[ID_METADATA_KEY] = record.id
        return {"id": vector_id, "values": values.tolist(), "metadata": metadata}

    def upsert_vectors(self, records: Sequence[VectorRecord]) -> None:
        """Write ``records`` (same ids overwrite), at most :data:`UPSERT_BATCH` per request.

        The text goes into metadata under ``text_field``. A record whose vector is all
        zeros is skipped: Pinecone refuses it, and cosine similarity could never find it.
        """
        vectors = [v for v in map(self._pinecone_vector, records) if v is not None]
        for batch in _batches(vectors, UPSERT_BATCH):
            self._write(
                "upsert",
                lambda index, timeout, batch=batch: index.upsert(
                    vectors=list(batch), namespace=self.namespace, timeout=timeout
                ),
            )

    def delete_vectors(self, ids: Sequence[str]) -> None:
        """Delete ``ids``, at most :data:`DELETE_BATCH` per request; missing ids are fine."""
        unique = list(dict.fromkeys(remote_id(i) for i in ids))
        for batch in _batches(unique, DELETE_BATCH):
            self._write(
                "delete",
                lambda index, timeout, batch=batch: index.delete(
                    ids=list(batch), namespace=self.namespace, timeout=timeout
                ),
            )


# -- reading SDK errors without importing the SDK ---------------------------------------
