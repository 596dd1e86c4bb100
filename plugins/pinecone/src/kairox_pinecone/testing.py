"""A loopback stand-in for one Pinecone index's data plane, for tests (ours and yours).

:class:`PineconeTestServer` is a real HTTP server on ``127.0.0.1`` that speaks the REST
API the pinecone SDK sends (``POST /query``, ``/vectors/upsert``, ``/vectors/delete``,
``/describe_index_stats``; ``GET /vectors/fetch``, ``/vectors/list``), so tests drive
the real SDK over a real socket instead of stubbing it::

    from kairox_pinecone.testing import PineconeTestServer

    with PineconeTestServer(384, api_key="test-key") as server:
        server.seed([("doc-1", vector, {"text": "Saturn's rings"})])
        index = pinecone.Index(host=server.url, api_key="test-key")  # plain http works
        index.query(vector=vector, top_k=3, include_metadata=True)

It behaves like the service where a client can tell: namespaces are separate stores
(``""`` is the default one, reported as ``__default__``), scores are cosine similarity
(or dot product / squared euclidean distance for those metrics), metadata filters are
evaluated (``$eq $ne $gt $gte $lt $lte $in $nin $exists $and $or``, by
:mod:`kairox_pinecone.testing_filters`), the dimension is
enforced on upsert and query (400), ids and metadata are validated, ``/vectors/list``
paginates, and errors come back as ``{"code": ..., "message": ..., "details": []}``.

Faults are switched on per test: a wrong or missing ``Api-Key`` gets 401;
:meth:`~PineconeTestServer.fail` answers the next requests with any status (403, 5xx,
429 with ``Retry-After`` via :meth:`~PineconeTestServer.throttle`);
:meth:`~PineconeTestServer.delay` slows replies; :meth:`~PineconeTestServer.malformed`
sends bodies that are not JSON; :meth:`~PineconeTestServer.disconnect` drops the
connection. Every request is recorded (:attr:`~PineconeTestServer.requests`,
:meth:`~PineconeTestServer.count`). The lifecycle, records and faults are
:class:`kairox.testing.loopback.LoopbackHTTPServer`'s. Only numpy and the standard library
are needed.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from kairox.testing.loopback import LoopbackHTTPServer, RecordedRequest, Reply, closed_url
from kairox_pinecone.testing_filters import BadRequest, matches_filter, value_kind

__all__ = [
    "DEFAULT_API_KEY",
    "BadRequest",
    "PineconeTestServer",
    "RecordedRequest",
    "StoredVector",
    "closed_url",
    "matches_filter",
]

DEFAULT_API_KEY = "kairox-test-key"
_DEFAULT_NAMESPACE_NAME = "__default__"
_MAX_ID_LENGTH = 512
_MAX_METADATA_BYTES = 40 * 1024
_MAX_TOP_K = 10_000
_MAX_TOP_K_WITH_DATA = 1_000
# grpc-gateway status codes, as Pinecone's data plane puts them in error bodies.
_GRPC_CODES = {
    400: 3,
    401: 16,
    403: 7,
    404: 5,
    408: 4,
    409: 6,
    412: 9,
    429: 8,
    500: 13,
    501: 12,
    502: 14,
    503: 14,
    504: 4,
}
_DEFAULT_MESSAGES = {
    401: "Invalid API Key",
    403: "Forbidden: the API key may not access this index",
    429: "Request failed. You've reached the max request rate for this index.",
    500: "Internal error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Deadline exceeded",
}
_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class StoredVector:
    """One vector as the test index holds it."""

    id: str
    values: tuple[float, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


# -- validation ---------------------------------------------------------------------------


def _check_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest("vector id must be a non-empty string")
    if len(value) > _MAX_ID_LENGTH or not value.isascii() or "\x00" in value:
        raise BadRequest(f"vector id {value[:60]!r} must be 1-512 ASCII characters without NUL")
    return value


def _check_metadata(value: Any, vector_id: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"metadata of vector {vector_id!r} must be an object")
    for key, item in value.items():
        ok = value_kind(item) is not None or (
            isinstance(item, list) and all(isinstance(v, str) for v in item)
        )
        if isinstance(item, float) and not math.isfinite(item):
            ok = False
        if not ok:
            raise BadRequest(
                f"Metadata value must be a string, number, boolean or list of strings, "
                f"got {json.dumps(item)} for field {key!r} of vector {vector_id!r}"
            )
    if len(json.dumps(value).encode()) > _MAX_METADATA_BYTES:
        raise BadRequest(f"Metadata size of vector {vector_id!r} exceeds the limit of 40960 bytes")
    return dict(value)


def _namespace(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest("namespace must be a string")
    return "" if value == _DEFAULT_NAMESPACE_NAME else value


# -- the server --------------------------------------------------------------------------


class PineconeTestServer(LoopbackHTTPServer):
    """One Pinecone index's data plane on ``127.0.0.1`` (a random free port).

    :param dimension: the index dimension; vectors of another width are refused (400).
    :param api_key: the key requests must send in ``Api-Key``; ``None`` accepts any.
        Change :attr:`api_key` at any time to make the next requests fail with 401.
    :param metric: ``"cosine"`` (default), ``"dotproduct"`` or ``"euclidean"``.
    :param max_upsert_vectors: vectors one upsert may carry (Pinecone: 1,000).
    :param max_delete_ids: ids one delete may carry (Pinecone: 1,000).

    Use it as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(
        self,
        dimension: int,
        *,
        api_key: str | None = DEFAULT_API_KEY,
        metric: str = "cosine",
        max_upsert_vectors: int = 1000,
        max_delete_ids: int = 1000,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be at least 1, got {dimension}")
        if metric not in ("cosine", "dotproduct", "euclidean"):
            raise ValueError(f"metric must be cosine, dotproduct or euclidean, got {metric!r}")
        super().__init__()
        self.dimension = dimension
        self.api_key = api_key
        self.metric = metric
        self.max_upsert_vectors = max_upsert_vectors
        self.max_delete_ids = max_delete_ids
        self._lock = threading.RLock()
        self._store: dict[str, dict[str, StoredVector]] = {}

    # -- the SDK -------------------------------------------------------------------------

    def sdk_index(self, *, api_key: str | None = None, retries: bool = False) -> Any:
        """A ``pinecone.Index`` (the real SDK) pointed at this server.

        :param api_key: the key to send (default: the server's own, so requests pass).
        :param retries: keep the SDK's own retries of 408/429/5xx; off by default so a
            test sees every status the server sends, as kairox-pinecone's source does.
        """
        from kairox_pinecone.errors import _switch_off_sdk_retries, load_pinecone

        pinecone = load_pinecone()
        index = pinecone.Index(host=self.url, api_key=api_key or self.api_key or "unused")
        if not retries:
            _switch_off_sdk_retries(index)
        return index

    # -- state ---------------------------------------------------------------------------

    def seed(self, records: Iterable[Any], *, namespace: str = "", text_field: str = "text") -> int:
        """Store vectors directly (no auth, no faults, no request recorded).

        A record is ``(id, values)``, ``(id, values, metadata)``, a mapping with ``id``,
        ``values`` and optional ``metadata``, or a :class:`kairox.retrieval.VectorRecord`
        (its text goes into metadata under ``text_field``). Returns how many were stored.

        :raises ValueError: a record the service would refuse (dimension, id, metadata).
        """
        vectors: list[dict[str, Any]] = []
        for record in records:
            if isinstance(record, Mapping):
                item = dict(record)
            elif isinstance(record, tuple):
                item = {"id": record[0], "values": record[1]}
                if len(record) > 2:
                    item["metadata"] = record[2]
            else:
                metadata = dict(getattr(record, "metadata", {}) or {})
                if getattr(record, "text", None) is not None:
                    metadata[text_field] = record.text
                item = {"id": record.id, "values": record.vector, "metadata": metadata}
            item["values"] = np.asarray(item["values"], dtype=np.float64).tolist()
            vectors.append(item)
        try:
            return self._upsert(vectors, _namespace(namespace), limit=None)
        except BadRequest as exc:
            raise ValueError(str(exc)) from exc

    def vectors(self, namespace: str = "") -> dict[str, StoredVector]:
        """A snapshot of one namespace: id -> :class:`StoredVector`."""
        with self._lock:
            return dict(self._store.get(_namespace(namespace), {}))

    def namespaces(self) -> list[str]:
        """Namespaces holding at least one vector (``""`` is the default one)."""
        with self._lock:
            return sorted(name for name, store in self._store.items() if store)

    # -- request handling (called from handler threads) -------------------------------

    def _handle(self, request: RecordedRequest, handler: BaseHTTPRequestHandler) -> Reply:
        number = self._record(request)
        reply = self._answer(request)
        reply.headers = {**reply.headers, "x-pinecone-request-id": f"test-{number}"}
        return reply

    def _answer(self, request: RecordedRequest) -> Reply:
        if request.json and request.json is None:
            return _error(400, "the request body is not valid JSON")
        delay = self.faults.take("delay", request)
        if delay is not None:
            self._pause(delay.seconds)
        if self.faults.take("disconnect", request) is not None:
            return Reply(drop=True)
        if self.api_key is not None and request.headers.get("api-key") != self.api_key:
            return _error(401)
        failure = self.faults.take("fail", request)
        if failure is not None:
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = _seconds(failure.retry_after)
            return _error(int(failure.error), failure.message, headers)
        bad = self.faults.take("malformed", request)
        if bad is not None:
            return Reply(200, bad.body or b'{"matches": [{"id": "x", "sco')
        try:
            status, payload = self._route(request)
        except BadRequest as exc:
            return _error(exc.status, str(exc))
        return Reply.json(status, payload)

    def _route(self, request: RecordedRequest) -> tuple[int, Any]:
        routes = {
            ("POST", "/query"): self._query,
            ("POST", "/vectors/upsert"): self._upsert_request,
            ("POST", "/vectors/delete"): self._delete,
            ("GET", "/vectors/fetch"): self._fetch,
            ("GET", "/vectors/list"): self._list,
            ("POST", "/describe_index_stats"): self._stats,
            ("GET", "/describe_index_stats"): self._stats,
        }
        handler = routes.get((request.method, request.path))
        if handler is None:
            raise BadRequest(f"no route for {request.method} {request.path}", 404)
        if request.method == "POST" and not isinstance(request.json, dict):
            raise BadRequest("the request body must be a JSON object")
        return 200, handler(request)

    # -- the API ---------------------------------------------------------------------------

    def _upsert(self, vectors: Any, namespace: str, *, limit: int | None) -> int:
        if not isinstance(vectors, list) or not vectors:
            raise BadRequest("vectors must be a non-empty array")
        if limit is not None and len(vectors) > limit:
            raise BadRequest(
                f"Too many vectors in one upsert: {len(vectors)} (the limit is {limit})"
            )
        checked: list[StoredVector] = []
        for item in vectors:
            if not isinstance(item, dict):
                raise BadRequest("each vector must be an object")
            vector_id = _check_id(item.get("id"))
            if item.get("sparseValues") is not None:
                raise BadRequest("this index is dense; sparse values are not supported")
            values = item.get("values")
            if not isinstance(values, list) or not all(
                value_kind(v) == "number" and math.isfinite(v) for v in values
            ):
                raise BadRequest(f"values of vector {vector_id!r} must be an array of numbers")
            if len(values) != self.dimension:
                raise BadRequest(
                    f"Vector dimension {len(values)} does not match the dimension of the "
                    f"index {self.dimension}"
                )
            if self.metric == "cosine" and not any(values):
                raise BadRequest("Dense vectors must contain at least one non-zero value")
            metadata = _check_metadata(item.get("metadata"), vector_id)
            checked.append(StoredVector(vector_id, tuple(float(v) for v in values), metadata))
        with self._lock:
            store = self._store.setdefault(namespace, {})
            for vector in checked:
                store[vector.id] = vector
        return len(checked)

    def _upsert_request(self, request: RecordedRequest) -> dict[str, Any]:
        body = request.json
        count = self._upsert(
            body.get("vectors"), _namespace(body.get("namespace")), limit=self.max_upsert_vectors
        )
        return {"upsertedCount": count}

    def _query(self, request: RecordedRequest) -> dict[str, Any]:
        body = request.json
        top_k = body.get("topK")
        if value_kind(top_k) != "number" or int(top_k) != top_k or not 1 <= top_k <= _MAX_TOP_K:
            raise BadRequest(f"topK must be an integer from 1 to {_MAX_TOP_K}")
        include_values = bool(body.get("includeValues"))
        include_metadata = bool(body.get("includeMetadata"))
        if (include_values or include_metadata) and top_k > _MAX_TOP_K_WITH_DATA:
            raise BadRequest(
                f"topK must be at most {_MAX_TOP_K_WITH_DATA} when values or metadata are included"
            )
        if body.get("sparseVector") is not None:
            raise BadRequest("this index is dense; sparse queries are not supported")
        namespace = _namespace(body.get("namespace"))
        with self._lock:
            stored = list(self._store.get(namespace, {}).values())
        vector = body.get("vector")
        if (vector is None) == (body.get("id") is None):
            raise BadRequest("exactly one of vector and id is required")
        if vector is None:
            found = {v.id: v for v in stored}.get(body["id"])
            vector = list(found.values) if found is not None else None
        if vector is not None:
            if not isinstance(vector, list) or not all(value_kind(v) == "number" for v in vector):
                raise BadRequest("vector must be an array of numbers")
            if len(vector) != self.dimension:
                raise BadRequest(
                    f"Vector dimension {len(vector)} does not match the dimension of the "
                    f"index {self.dimension}"
                )
        query_filter = body.get("filter")
        candidates = [v for v in stored if matches_filter(v.metadata, query_filter)]
        matches: list[dict[str, Any]] = []
        if vector is not None and candidates:
            matrix = np.asarray([v.values for v in candidates], dtype=np.float64)
            scores = self._scores(matrix, np.asarray(vector, dtype=np.float64))
            order = np.lexsort(
                (np.arange(len(candidates)), scores if self.metric == "euclidean" else -scores)
            )
            for position in order[:top_k].tolist():
                candidate = candidates[position]
                match: dict[str, Any] = {
                    "id": candidate.id,
                    "score": float(scores[position]),
                    "values": list(candidate.values) if include_values else [],
                }
                if include_metadata:
                    match["metadata"] = candidate.metadata
                matches.append(match)
        return {
            "matches": matches,
            "namespace": namespace,
            "usage": {"readUnits": 1 + len(stored) // 1000},
        }

    def _scores(self, matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
        if self.metric == "euclidean":
            return ((matrix - query) ** 2).sum(axis=1)
        scores = matrix @ query
        if self.metric == "cosine":
            norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
            scores = np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0)
        return scores

    def _delete(self, request: RecordedRequest) -> dict[str, Any]:
        body = request.json
        namespace = _namespace(body.get("namespace"))
        ids, delete_all, query_filter = body.get("ids"), body.get("deleteAll"), body.get("filter")
        if sum(x is not None and x is not False for x in (ids, delete_all, query_filter)) != 1:
            raise BadRequest("exactly one of ids, deleteAll and filter is required")
        with self._lock:
            store = self._store.get(namespace, {})
            if ids is not None:
                if not isinstance(ids, list) or not ids:
                    raise BadRequest("ids must be a non-empty array")
                if len(ids) > self.max_delete_ids:
                    raise BadRequest(
                        f"Too many ids in one delete: {len(ids)} (the limit is {self.max_delete_ids})"
                    )
                for vector_id in ids:
                    store.pop(_check_id(vector_id), None)
            elif delete_all:
                store.clear()
            else:
                if not query_filter:
                    raise BadRequest("filter must not be empty")
                for vector_id in [
                    v.id for v in store.values() if matches_filter(v.metadata, query_filter)
                ]:
                    del store[vector_id]
        return {}

    def _fetch(self, request: RecordedRequest) -> dict[str, Any]:
        ids = request.query.get("ids", [])
        if not ids:
            raise BadRequest("ids is required")
        namespace = _namespace((request.query.get("namespace") or [""])[0])
        with self._lock:
            store = self._store.get(namespace, {})
            found = {i: store[i] for i in ids if i in store}
        return {
            "vectors": {
                i: {"id": v.id, "values": list(v.values), "metadata": v.metadata}
                for i, v in found.items()
            },
            "namespace": namespace,
            "usage": {"readUnits": 1},
        }

    def _list(self, request: RecordedRequest) -> dict[str, Any]:
        first = {key: values[0] for key, values in request.query.items() if values}
        namespace = _namespace(first.get("namespace", ""))
        prefix = first.get("prefix", "")
        try:
            limit = int(first.get("limit", "100"))
            offset = (
                int(base64.urlsafe_b64decode(first["paginationToken"]).decode())
                if "paginationToken" in first
                else 0
            )
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(f"invalid limit or paginationToken: {exc}") from exc
        if not 1 <= limit <= 100:
            raise BadRequest("limit must be from 1 to 100")
        with self._lock:
            ids = sorted(i for i in self._store.get(namespace, {}) if i.startswith(prefix))
        page = ids[offset : offset + limit]
        response: dict[str, Any] = {
            "vectors": [{"id": i} for i in page],
            "namespace": namespace,
            "usage": {"readUnits": 1},
        }
        if offset + limit < len(ids):
            token = base64.urlsafe_b64encode(str(offset + limit).encode()).decode()
            response["pagination"] = {"next": token}
        return response

    def _stats(self, request: RecordedRequest) -> dict[str, Any]:
        if isinstance(request.json, dict) and request.json.get("filter"):
            raise BadRequest("describe_index_stats does not support filters on this index")
        with self._lock:
            counts = {
                (name or _DEFAULT_NAMESPACE_NAME): {"vectorCount": len(store)}
                for name, store in self._store.items()
                if store
            }
        return {
            "namespaces": counts,
            "dimension": self.dimension,
            "indexFullness": 0.0,
            "totalVectorCount": sum(c["vectorCount"] for c in counts.values()),
            "metric": self.metric,
            "vectorType": "dense",
        }


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _error(status: int, message: str | None = None, headers: dict[str, str] | None = None) -> Reply:
    if message is None:
        message = _DEFAULT_MESSAGES.get(status) or HTTPStatus(status).phrase
    body = {"code": _GRPC_CODES.get(status, 2), "message": message, "details": []}
    return Reply.json(status, body, headers)
