"""``WeaviateSource``: a Kairox retriever (and vector sync target) over one Weaviate collection.

Everything that needs ``weaviate`` (and so ``grpc``) imports it inside a function: Kairox
imports every plugin at start-up, and this module is imported with the plugin.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import math
import os
import socket
import threading
import uuid as uuid_lib
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from kairox import KairoxError
from kairox.retrieval import Hit, Query, ScoreKind, VectorRecord
from kairox.support.retry import RetryPolicy, call_with_retries
from kairox_weaviate.config import PROPERTY_NAME, WeaviateConfig
from kairox_weaviate.errors import (
    WeaviateAuthError,
    WeaviateNotFoundError,
    WeaviateReplyError,
    WeaviateSourceError,
    _detail,
    is_retryable,
    load_client,
    translate,
)
from kairox_weaviate.filters import _MATCH_NOTHING, SUPPORT, build_filter, compile_filter

if TYPE_CHECKING:
    from kairox.retrieval.embedding import EmbeddingBackend

__all__ = ["WeaviateSource"]

T = TypeVar("T")


# The gRPC channel's own policy. The client retries a Search that ends UNAVAILABLE by
# sleeping 1 s, 2 s, 4 s... (weaviate.retry._Retry), whatever the caller's deadline, so the
# channel absorbs short outages first: waitForReady turns "cannot connect" into a wait
# bounded by the call's deadline (DEADLINE_EXCEEDED, which the client does not retry), and
# retryPolicy re-sends a call the server answered UNAVAILABLE after 50-400 ms.
_SERVICE_CONFIG = {
    "methodConfig": [
        {
            "name": [{"service": "weaviate.v1.Weaviate"}],
            "waitForReady": True,
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.05s",
                "maxBackoff": "0.4s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ]
}

#: property names Weaviate (or the client) reserves
_RESERVED = frozenset({"id", "_id", "vector", "_additional"})


# -- hits ----------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A property value as plain JSON-like data (uuids and dates as strings)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, uuid_lib.UUID):
        return str(value)
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "latitude") and hasattr(value, "longitude"):
        return {"latitude": value.latitude, "longitude": value.longitude}
    return str(value)


def _clean_text(text: str) -> str:
    """``text`` as valid UTF-8 (a lone surrogate cannot go into a protobuf string)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _ClientBox:
    """Holds the connected client so a finaliser can close it without keeping the source."""

    def __init__(self) -> None:
        self.client: Any = None

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            # closing is best effort: the process may be exiting
            with contextlib.suppress(Exception):
                client.close()


class WeaviateSource:
    """One Weaviate collection as a Kairox knowledge base.

    Implements :class:`kairox.retrieval.Source` (``retrieve``) and
    :class:`kairox.retrieval.VectorSyncTarget` (``upsert_vectors``, ``delete_vectors``).
    The client connects on first use (REST ``/v1/meta`` and ``/v1/schema/<collection>``,
    then gRPC for everything else), is shared by every call, and is closed by
    :meth:`close` or when the source is garbage-collected.

    Scores (``score_kind``), higher is better:

    * ``bm25``: Weaviate's BM25F score (``ScoreKind.BM25``).
    * ``near_vector``: ``1 - distance`` (``ScoreKind.COSINE``): with Weaviate's default
      cosine metric that is exactly the cosine similarity; with another metric it is
      still higher-is-better but not a cosine.
    * ``hybrid``: Weaviate's relative-score fusion (``ScoreKind.PROBABILITY``): BM25 and
      vector scores are each min-max normalised over the candidates, then weighted
      ``alpha`` (vector) and ``1 - alpha`` (BM25); a score in [0, 1] that is relative to
      one result list, not a calibrated probability.
    """

    #: objects per BatchObjects request, ids per BatchDelete request
    write_batch_size = 100
    delete_batch_size = 500

    def __init__(
        self,
        name: str,
        config: WeaviateConfig,
        *,
        embedder: EmbeddingBackend | None = None,
        sync_backend: str | None = None,
    ) -> None:
        if config.mode != "bm25" and embedder is None:
            raise ValueError(f"mode {config.mode!r} needs an embedder")
        self.name = name
        self.filter_support = SUPPORT
        self.config = config
        self.embedder = embedder if config.mode != "bm25" else None
        #: the backend whose vectors the collection holds (VectorSyncTarget): the configured
        #: ``embedding_backend``, else ``sync_backend`` (the factory passes the workspace's)
        self.embedding_backend = config.embedding_backend or sync_backend or ""
        self.score_kind = {
            "bm25": ScoreKind.BM25,
            "near_vector": ScoreKind.COSINE,
            "hybrid": ScoreKind.PROBABILITY,
        }[config.mode]
        self._box = _ClientBox()
        self._collection: Any = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._box.close)

    def __repr__(self) -> str:
        return (
            f"WeaviateSource({self.name!r}, {self.config.url!r}, "
            f"collection={self.config.collection!r}, mode={self.config.mode!r})"
        )

    # -- connection ---------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"Weaviate at {self.config.url} (knowledge base {self.name!r})"

    def _api_key(self) -> str | None:
        env = self.config.api_key_env
        if env is None:
            return None
        key = os.environ.get(env)
        if not key:
            raise WeaviateAuthError(
                f"knowledge base {self.name!r}: api_key_env names the environment variable "
                f"{env}, which is not set; export {env}=<your Weaviate API key>"
            )
        return key

    def _connect(self) -> Any:
        weaviate = load_client()
        from weaviate.classes.init import AdditionalConfig, Auth, GrpcConfig, Timeout

        config = self.config
        seconds = config.timeout_ms / 1000
        key = self._api_key()
        client = weaviate.connect_to_custom(
            http_host=config.http_host,
            http_port=config.http_port,
            http_secure=config.http_secure,
            grpc_host=config.grpc_target_host,
            grpc_port=config.grpc_port,
            grpc_secure=config.http_secure,
            auth_credentials=Auth.api_key(key) if key else None,
            additional_config=AdditionalConfig(
                timeout=Timeout(query=seconds, insert=max(30.0, seconds), init=seconds),
                grpc_config=GrpcConfig(
                    channel_options=[
                        ("grpc.service_config", json.dumps(_SERVICE_CONFIG)),
                        ("grpc.enable_retries", 1),
                    ]
                ),
            ),
            # No OIDC discovery, no gRPC health ping and, above all, no request to
            # pypi.org for the latest client version on every connect; the REST
            # /v1/meta call still runs and the gRPC port is probed below.
            skip_init_checks=True,
        )
        try:
            self._probe_grpc(min(seconds, 5.0))
        except BaseException:
            client.close()
            raise
        return client

    def _probe_grpc(self, timeout: float) -> None:
        """A plain TCP connect to the gRPC port, so a wrong ``grpc_port`` fails fast and
        says so (gRPC itself would wait for the deadline)."""
        host, port = self.config.grpc_target_host, self.config.grpc_port
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError as exc:
            raise WeaviateSourceError(
                f"{self._where}: the REST endpoint answered but the gRPC port {host}:{port} "
                f"cannot be reached ({exc.strerror or exc}); check grpc_port and grpc_host "
                "(Weaviate serves gRPC on 50051 by default)"
            ) from exc

    def _ready_collection(self) -> Any:
        """The (tenant-bound) collection handle, connecting and checking it on first use."""
        with self._lock:
            if self._collection is not None and self._box.client is not None:
                return self._collection
            if self._box.client is None or not self._box.client.is_connected():
                self._box.close()
                self._box.client = self._connect()
            client = self._box.client
            name = self.config.collection
            if not client.collections.exists(name):
                raise WeaviateNotFoundError(
                    f"{self._where} has no collection {name!r}: create it, or correct "
                    "`collection` (Weaviate capitalises the first letter of collection names)"
                )
            collection = client.collections.get(name)
            if self.config.tenant:
                collection = collection.with_tenant(self.config.tenant)
            self._collection = collection
            return collection

    def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        with self._lock:
            self._collection = None
            self._box.close()

    # -- calls ---------------------------------------------------------------------------------

    def _call(self, work: Callable[[Any], T], policy: RetryPolicy) -> T:
        """``work(collection)`` with retries for throttling and unavailability; every
        failure comes out as a Kairox error that says what to check."""
        try:
            return call_with_retries(
                lambda: work(self._ready_collection()), retryable=is_retryable, policy=policy
            )
        except (KairoxError, ImportError):
            raise
        except Exception as exc:
            if "could not find class" in _detail(exc).lower():
                with self._lock:
                    self._collection = None  # re-check on the next call
            raise translate(exc, self.name, self._where, self.config) from exc

    # -- Source -----------------------------------------------------------------------------------

    def _query_vector(self, query: Query, text: str) -> list[float]:
        embedder = self.embedder
        assert embedder is not None
        vector = query.embeddings.get(embedder.name)
        if vector is None:
            vector = embedder.embed([text])[0]
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if array.shape[0] != embedder.dim:
            raise WeaviateSourceError(
                f"knowledge base {self.name!r}: the query vector for backend "
                f"{embedder.name!r} has {array.shape[0]} dimensions, expected {embedder.dim}"
            )
        if not np.isfinite(array).all():
            raise WeaviateSourceError(
                f"knowledge base {self.name!r}: the query vector from {embedder.name!r} "
                "holds NaN or infinity"
            )
        return [float(x) for x in array]

    def _search(self, query: Query) -> list[Hit]:
        text = _clean_text(query.text)
        static = build_filter(self.config.filters)  # the deprecated `filters` table
        where = compile_filter(self.name, query.filter)
        if where is _MATCH_NOTHING or static is _MATCH_NOTHING:
            return []
        if static is not None:
            from weaviate.classes.query import Filter

            where = static if where is None else Filter.all_of([static, where])
        vector = self._query_vector(query, text) if self.embedder is not None else None
        from weaviate.classes.query import HybridFusion, MetadataQuery

        config = self.config
        metadata = MetadataQuery(score=True, distance=True)

        def run(collection: Any) -> Any:
            if config.mode == "bm25":
                return collection.query.bm25(
                    query=text, limit=query.k, filters=where, return_metadata=metadata
                )
            if config.mode == "near_vector":
                return collection.query.near_vector(
                    near_vector=vector,
                    limit=query.k,
                    filters=where,
                    target_vector=config.target_vector,
                    return_metadata=metadata,
                )
            return collection.query.hybrid(
                query=text,
                vector=vector,
                alpha=config.alpha,
                fusion_type=HybridFusion.RELATIVE_SCORE,
                limit=query.k,
                filters=where,
                target_vector=config.target_vector,
                return_metadata=metadata,
            )

        response = self._call(run, RetryPolicy.within(config.timeout_ms))
        return self._hits(response.objects, query.k)

    def _hits(self, objects: Sequence[Any], k: int) -> list[Hit]:
        config = self.config
        hits: list[Hit] = []
        seen: set[str] = set()
        for obj in objects:
            uid = str(obj.uuid)
            if uid in seen:
                continue
            seen.add(uid)
            properties = dict(obj.properties or {})
            text = properties.get(config.text_property)
            if not isinstance(text, str):
                present = ", ".join(sorted(properties)) or "none"
                raise WeaviateReplyError(
                    f"{self._where}: object {uid} in collection {config.collection!r} has no "
                    f"text property {config.text_property!r} (text_property); its properties: "
                    f"{present}. Set text_property to the property holding the passage text"
                )
            score = self._score(obj.metadata, uid)
            uri_key = next((k for k in ("uri", "path") if isinstance(properties.get(k), str)), None)
            own_id = properties.get(config.id_property) if config.id_property else None
            hit_id = own_id if isinstance(own_id, str) and own_id else uid
            skip = {config.text_property, config.id_property, uri_key}
            hits.append(
                Hit(
                    id=hit_id,
                    text=text,
                    score=score,
                    source=self.name,
                    uri=properties[uri_key] if uri_key else None,
                    metadata={
                        key: _plain(value) for key, value in properties.items() if key not in skip
                    },
                )
            )
        hits.sort(key=lambda hit: -hit.score)  # stable: Weaviate's order breaks ties
        return hits[:k]

    def _score(self, metadata: Any, uid: str) -> float:
        if self.config.mode == "near_vector":
            distance = getattr(metadata, "distance", None)
            value = None if distance is None else 1.0 - float(distance)
            what = "distance"
        else:
            score = getattr(metadata, "score", None)
            value = None if score is None else float(score)
            what = "score"
        if value is None or not math.isfinite(value):
            raise WeaviateReplyError(
                f"{self._where}: object {uid} came back without a usable {what} "
                f"({self.config.mode} search asked for it)"
            )
        return value

    async def retrieve(self, query: Query) -> list[Hit]:
        if not query.text.strip():
            return []
        return await asyncio.to_thread(self._search, query)

    # -- VectorSyncTarget -------------------------------------------------------------------------

    def _write_policy(self) -> RetryPolicy:
        return RetryPolicy(
            attempts=5, max_delay=2.0, budget=max(30.0, self.config.timeout_ms / 250)
        )

    def upsert_vectors(self, records: Sequence[VectorRecord]) -> None:
        """Insert or overwrite records; object uuids are ``generate_uuid5(record.id)``."""
        if not records:
            return
        if not self.embedding_backend:
            raise WeaviateSourceError(
                f"knowledge base {self.name!r} has no embedding_backend, so Kairox cannot "
                "tell which model its vectors come from; set embedding_backend"
            )
        from weaviate.classes.data import DataObject
        from weaviate.util import generate_uuid5

        config = self.config
        latest: dict[str, VectorRecord] = {record.id: record for record in records}
        objects = []
        for record in latest.values():
            vector = [float(x) for x in np.asarray(record.vector, dtype=np.float32).reshape(-1)]
            properties: dict[str, Any] = {}
            for key, value in record.metadata.items():
                if value is None:
                    continue
                if not isinstance(key, str) or not PROPERTY_NAME.fullmatch(key) or key in _RESERVED:
                    raise WeaviateSourceError(
                        f"record {record.id!r}: metadata key {key!r} cannot be a Weaviate "
                        "property name"
                    )
                properties[key] = value
            properties[config.text_property] = record.text
            if config.id_property:
                properties[config.id_property] = record.id
            objects.append(
                DataObject(
                    properties=properties,
                    uuid=generate_uuid5(record.id),
                    vector={config.target_vector: vector} if config.target_vector else vector,
                )
            )
        policy = self._write_policy()
        for chunk in _batches(objects, self.write_batch_size):
            result = self._call(lambda c, chunk=chunk: c.data.insert_many(list(chunk)), policy)
            if result.has_errors:
                errors = list(result.errors.values())
                raise WeaviateSourceError(
                    f"{self._where} refused {len(errors)} of {len(chunk)} objects; the first: "
                    f"{errors[0].message}"
                )

    def delete_vectors(self, ids: Sequence[str]) -> None:
        """Delete the objects of these record ids; ids that are not there are fine."""
        if not ids:
            return
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        uuids = [generate_uuid5(i) for i in dict.fromkeys(ids)]
        policy = self._write_policy()
        for chunk in _batches(uuids, self.delete_batch_size):
            where = Filter.by_id().contains_any(list(chunk))
            self._call(lambda c, where=where: c.data.delete_many(where=where), policy)
