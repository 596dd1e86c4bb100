"""A loopback Weaviate for tests: the real gRPC service (built on weaviate-client's own stubs)
plus the REST endpoints the v4 client needs, in one process, on 127.0.0.1.

No Weaviate server can run in a test sandbox, and stubbing the client would test nothing, so
:class:`WeaviateTestServer` speaks Weaviate's wire protocol instead and the real
``weaviate-client`` v4 talks to it over real sockets::

    from kairox_weaviate.testing import WeaviateTestServer

    with WeaviateTestServer(collections=["Docs"]) as server:
        server.seed("Docs", [{"text": "Saturn's rings are ice"}], vectors=[[0.1, 0.9]])
        client = weaviate.connect_to_custom(
            http_host="127.0.0.1", http_port=server.http_port, http_secure=False,
            grpc_host="127.0.0.1", grpc_port=server.grpc_port, grpc_secure=False,
        )

What it implements, the way Weaviate does it where a client can tell:

* gRPC ``weaviate.v1.Weaviate``: ``Search`` (BM25, ``near_vector``, hybrid with ``alpha`` and
  relative-score or ranked fusion, plain fetch; filters; ``limit``/``offset``; tenants; named
  target vectors; the properties and metadata asked for), ``BatchObjects`` (insert, or
  overwrite an existing uuid), ``BatchDelete`` (any filter, ``by_id`` included), ``TenantsGet``,
  and the ``grpc.health.v1.Health/Check`` probe the client sends when it does init checks.
* REST: ``GET /v1/meta``, ``/v1/.well-known/ready``, ``/live`` and ``openid-configuration``
  (404: no OIDC), ``GET /v1/schema`` and ``GET /v1/schema/{collection}`` (404 when missing).
* Errors with Weaviate's own messages: unknown collection (``could not find class ... in
  schema``), unknown tenant (``tenant not found``), multi-tenancy misuse, unknown filter
  property, filter value of the wrong type, vectors of another dimension.
* API-key auth (``Authorization: Bearer <key>``; 401 over REST, ``UNAUTHENTICATED`` over
  gRPC) when the server has a key.
* Failure injection per target (a gRPC method name such as ``"Search"``, or ``"GET /v1/meta"``
  for REST): :meth:`~WeaviateTestServer.fail` (a gRPC status or an HTTP status, N times),
  :meth:`~WeaviateTestServer.delay` (slow replies), :meth:`~WeaviateTestServer.malform`
  (replies missing properties or scores, or REST bodies that are not JSON); every request
  is counted (:meth:`~WeaviateTestServer.count`).

Scoring is a plain re-implementation, not Weaviate's code: BM25 (k1 1.2, b 0.75) summed over
the searched text properties, with Weaviate's ``word`` tokenization (lower-cased runs of
letters and digits) and its ``en`` stop words; cosine distance (``1 - cos``) for vectors;
hybrid fuses the two with ``alpha`` (1 = vector only) by relative score (min-max normalised,
Weaviate's default) or by rank (``1 / (60 + rank)``). Text equality filters compare tokens
like Weaviate's ``word`` tokenization does: ``equal("New York")`` matches a value holding
both tokens.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import struct
import threading
import time
import uuid as uuid_lib
from collections.abc import Iterable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2
from weaviate.proto.v1 import (
    base_pb2,
    base_search_pb2,
    batch_delete_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    tenants_pb2,
    weaviate_pb2_grpc,
)

__all__ = ["StoredObject", "TestCollection", "WeaviateTestServer"]

#: The Weaviate version ``/v1/meta`` reports; the client needs at least 1.27.0.
DEFAULT_VERSION = "1.32.0"
#: What ``/v1/meta`` says about the largest gRPC message (Weaviate's default, 100 MB).
GRPC_MAX_MESSAGE_SIZE = 104_858_000
#: Weaviate's default page size when a search has no ``limit``.
DEFAULT_LIMIT = 10

# Weaviate's ``en`` stop-word preset (entities/stopwords/presets.go).
EN_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
        "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then",
        "there", "these", "they", "this", "to", "was", "will", "with",
    }
)  # fmt: skip
_WORD = re.compile(r"[^\W_]+")
_BM25_K1 = 1.2
_BM25_B = 0.75

# Weaviate's default HNSW settings, as GET /v1/schema/{class} reports them.
_HNSW_CONFIG = {
    "cleanupIntervalSeconds": 300,
    "distance": "cosine",
    "dynamicEfFactor": 8,
    "dynamicEfMax": 500,
    "dynamicEfMin": 100,
    "ef": -1,
    "efConstruction": 128,
    "filterStrategy": "sweeping",
    "flatSearchCutoff": 40000,
    "maxConnections": 32,
    "skip": False,
    "vectorCacheMaxObjects": 1000000000000,
}

_VALUE_NAMES = {
    "value_text": "valueText",
    "value_int": "valueInt",
    "value_boolean": "valueBoolean",
    "value_number": "valueNumber",
    "value_text_array": "valueTextArray",
    "value_int_array": "valueIntArray",
    "value_boolean_array": "valueBooleanArray",
    "value_number_array": "valueNumberArray",
    "value_geo": "valueGeoRange",
}
_VALUE_FOR_TYPE = {
    "text": "valueText",
    "uuid": "valueText",
    "date": "valueDate",
    "int": "valueInt",
    "number": "valueNumber",
    "boolean": "valueBoolean",
}
_Op = base_pb2.Filters.Operator


def tokenize(text: str) -> list[str]:
    """Weaviate's ``word`` tokenization: lower-cased runs of letters and digits."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class TestCollection:
    """A collection the server starts with.

    :param name: the collection (class) name, as Weaviate spells it (capitalised).
    :param multi_tenancy: whether objects live in tenants (then every request names one).
    :param tenants: the tenants that exist from the start.
    :param properties: property name -> Weaviate data type (``text``, ``text[]``, ``int``,
        ``number``, ``boolean``, ``uuid``, ``date``, ``object``...). Properties not listed
        are added on first write, like Weaviate's auto-schema.
    """

    __test__ = False  # not a pytest test class, despite the name

    name: str
    multi_tenancy: bool = False
    tenants: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass
class StoredObject:
    """One object as the server holds it; ``vectors`` maps a vector name (``"default"``
    for the unnamed vector) to its values."""

    uuid: str
    properties: dict[str, Any]
    vectors: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class _Collection:
    name: str
    multi_tenancy: bool
    properties: dict[str, str]
    # tenant (None when multi-tenancy is off) -> uuid -> object
    shards: dict[str | None, dict[str, StoredObject]]


@dataclass
class _Fault:
    target: str
    times: int | None  # None: every request from now on
    code: grpc.StatusCode | None = None
    status: int | None = None
    message: str = ""
    seconds: float = 0.0
    malform: str | None = None


class _Abort(Exception):
    """A request that fails the way Weaviate would fail it."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class WeaviateTestServer:
    """A Weaviate stand-in on two loopback ports (REST and gRPC); a context manager.

    :param collections: the collections that exist from the start: names, or
        :class:`TestCollection` for multi-tenancy and declared property types.
    :param api_key: when set, every request but the health probes must carry
        ``Authorization: Bearer <api_key>``.
    :param version: the Weaviate version ``/v1/meta`` reports; the client picks its
        request encoding from it (named-vector ``vectors`` from 1.29, ``alpha_param``
        from 1.36.6...).
    """

    def __init__(
        self,
        collections: Iterable[str | TestCollection] = (),
        api_key: str | None = None,
        *,
        version: str = DEFAULT_VERSION,
    ) -> None:
        self.api_key = api_key
        self.version = version
        self.host = "127.0.0.1"
        self.requests: list[str] = []
        #: every ``SearchRequest`` received (after auth and faults), oldest first
        self.searches: list[search_get_pb2.SearchRequest] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._faults: list[_Fault] = []
        self._collections: dict[str, _Collection] = {}
        for spec in collections:
            if isinstance(spec, str):
                self.create_collection(spec)
            else:
                self.create_collection(
                    spec.name,
                    multi_tenancy=spec.multi_tenancy,
                    tenants=spec.tenants,
                    properties=spec.properties,
                )
        self._pool: futures.ThreadPoolExecutor | None = None
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> WeaviateTestServer:
        """Bind both ports and start serving (``with`` does this)."""
        self._stopping.clear()
        self._pool = futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="wv-grpc")
        server = grpc.server(self._pool)
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(_Servicer(self), server)
        server.add_generic_rpc_handlers((_health_handler(self),))
        self.grpc_port = server.add_insecure_port(f"{self.host}:0")
        server.start()
        self._grpc = server

        handler = type("_BoundHandler", (_RestHandler,), {"server_state": self})
        self._http = ThreadingHTTPServer((self.host, 0), handler)
        self._http.daemon_threads = True
        self.http_port = self._http.server_address[1]
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, args=(0.02,), name="wv-rest", daemon=True
        )
        self._http_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free both ports; requests in flight are cut off."""
        self._stopping.set()
        if self._grpc is not None:
            self._grpc.stop(grace=0).wait(5)
            self._grpc = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._http_thread is not None:
            self._http_thread.join(5)
            self._http_thread = None

    def __enter__(self) -> WeaviateTestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The REST base url, ``http://127.0.0.1:<http_port>``."""
        return f"http://{self.host}:{self.http_port}"

    # -- data -------------------------------------------------------------------------------

    def create_collection(
        self,
        name: str,
        *,
        multi_tenancy: bool = False,
        tenants: Iterable[str] = (),
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Create (or replace) a collection."""
        with self._lock:
            shards: dict[str | None, dict[str, StoredObject]] = (
                {tenant: {} for tenant in tenants} if multi_tenancy else {None: {}}
            )
            self._collections[name] = _Collection(
                name, multi_tenancy, dict(properties or {}), shards
            )

    def drop_collection(self, name: str) -> None:
        with self._lock:
            self._collections.pop(name, None)

    def add_tenant(self, collection: str, tenant: str) -> None:
        with self._lock:
            coll = self._collection(collection)
            if not coll.multi_tenancy:
                raise ValueError(f"collection {collection!r} has multi-tenancy disabled")
            coll.shards.setdefault(tenant, {})

    def seed(
        self,
        collection: str,
        objects: Sequence[Mapping[str, Any]],
        vectors: Sequence[Sequence[float] | Mapping[str, Sequence[float]]] | None = None,
        tenant: str | None = None,
        *,
        uuids: Sequence[str | uuid_lib.UUID] | None = None,
    ) -> list[str]:
        """Store objects directly (no request counted); returns their uuids.

        :param objects: one property mapping per object.
        :param vectors: per object, its unnamed vector, or a mapping of named vectors.
        :param tenant: the tenant to store into (created if missing) for a multi-tenant
            collection.
        :param uuids: the objects' uuids (random ones by default); an existing uuid is
            overwritten.
        """
        if vectors is not None and len(vectors) != len(objects):
            raise ValueError("seed(): give one vector (or vector mapping) per object")
        if uuids is not None and len(uuids) != len(objects):
            raise ValueError("seed(): give one uuid per object")
        out: list[str] = []
        with self._lock:
            coll = self._collection(collection)
            if coll.multi_tenancy:
                if tenant is None:
                    raise ValueError(f"collection {collection!r} is multi-tenant: pass tenant=")
                coll.shards.setdefault(tenant, {})
            elif tenant is not None:
                raise ValueError(f"collection {collection!r} has multi-tenancy disabled")
            shard = coll.shards[tenant]
            for index, props in enumerate(objects):
                uid = str(uuids[index]) if uuids is not None else str(uuid_lib.uuid4())
                vecs: dict[str, list[float]] = {}
                if vectors is not None:
                    given = vectors[index]
                    if isinstance(given, Mapping):
                        vecs = {name: [float(x) for x in vec] for name, vec in given.items()}
                    else:
                        vecs = {"default": [float(x) for x in given]}
                properties = dict(props)
                for key, value in properties.items():
                    coll.properties.setdefault(key, _infer_type(value))
                shard[uid] = StoredObject(uid, properties, vecs)
                out.append(uid)
        return out

    def objects(self, collection: str, tenant: str | None = None) -> list[StoredObject]:
        """Copies of the objects stored in a collection (or one tenant of it)."""
        with self._lock:
            coll = self._collection(collection)
            if tenant not in coll.shards:
                raise KeyError(f"collection {collection!r} has no tenant {tenant!r}")
            return [
                StoredObject(o.uuid, dict(o.properties), {k: list(v) for k, v in o.vectors.items()})
                for o in coll.shards[tenant].values()
            ]

    def _collection(self, name: str) -> _Collection:
        try:
            return self._collections[name]
        except KeyError:
            raise KeyError(f"the test server has no collection {name!r}") from None

    # -- failure injection ---------------------------------------------------------------------

    def fail(
        self,
        target: str,
        error: grpc.StatusCode | str | int,
        *,
        times: int | None = 1,
        message: str | None = None,
    ) -> None:
        """Fail the next ``times`` requests to ``target`` (``None``: all of them).

        :param target: a gRPC method (``"Search"``, ``"BatchObjects"``, ``"BatchDelete"``,
            ``"Health"``) or a REST ``"METHOD /path"`` prefix (``"GET /v1/schema"``).
        :param error: a gRPC status (``"UNAVAILABLE"``, ``grpc.StatusCode.RESOURCE_EXHAUSTED``)
            for a gRPC target, an HTTP status (``503``, ``429``) for a REST one.
        """
        rest = " " in target
        if isinstance(error, int) != rest:
            kind = "an HTTP status" if rest else "a gRPC status"
            raise ValueError(f"target {target!r} needs {kind}, got {error!r}")
        if isinstance(error, int):
            fault = _Fault(target, times, status=error)
        else:
            code = error if isinstance(error, grpc.StatusCode) else grpc.StatusCode[error]
            fault = _Fault(target, times, code=code)
        fault.message = message or "injected by WeaviateTestServer"
        with self._lock:
            self._faults.append(fault)

    def delay(self, target: str, seconds: float, *, times: int | None = None) -> None:
        """Answer the next ``times`` requests to ``target`` only after ``seconds``."""
        with self._lock:
            self._faults.append(_Fault(target, times, seconds=seconds))

    def malform(self, target: str = "Search", mode: str = "drop_properties", *, times=None):
        """Send broken replies to ``target``.

        Modes: ``"drop_properties"`` (search results without any property),
        ``"no_score"`` (search results without score or distance), ``"bad_json"``
        (a REST body that is not JSON).
        """
        if mode not in {"drop_properties", "no_score", "bad_json"}:
            raise ValueError(f"unknown malform mode {mode!r}")
        with self._lock:
            self._faults.append(_Fault(target, times, malform=mode))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def count(self, target: str) -> int:
        """Requests received for ``target`` (rejected ones included): a gRPC method name,
        or a REST ``"METHOD /path"`` prefix."""
        with self._lock:
            if " " in target:
                return sum(1 for r in self.requests if r.startswith(target))
            return sum(1 for r in self.requests if r == target)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.searches.clear()

    def _take_faults(self, name: str) -> list[_Fault]:
        with self._lock:
            taken = []
            for fault in list(self._faults):
                hit = name == fault.target or (
                    " " in fault.target and name.startswith(fault.target)
                )
                if not hit:
                    continue
                taken.append(fault)
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
            return taken

    def _sleep(self, seconds: float, alive=lambda: True) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set() and alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._stopping.wait(min(left, 0.02))

    def _auth_error(self, header: str | None) -> str | None:
        if self.api_key is None:
            return None
        if not header or not header.startswith("Bearer "):
            return (
                "anonymous access not enabled, please provide an auth scheme such as "
                "OIDC or an api key"
            )
        if header[len("Bearer ") :] != self.api_key:
            return "unauthorized: invalid api key: the key is not valid"
        return None

    # -- gRPC request handling (called by _Servicer) -----------------------------------------

    def _grpc_enter(self, name: str, context: grpc.ServicerContext) -> set[str]:
        """Count, authenticate and apply faults; returns the malform modes in force."""
        with self._lock:
            self.requests.append(name)
        if name != "Health":
            header = dict(context.invocation_metadata()).get("authorization")
            problem = self._auth_error(header)
            if problem is not None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)
        malformed: set[str] = set()
        for fault in self._take_faults(name):
            if fault.seconds:
                self._sleep(fault.seconds, context.is_active)
            if fault.code is not None:
                context.abort(fault.code, fault.message)
            if fault.malform:
                malformed.add(fault.malform)
        return malformed

    def _shard(self, coll: _Collection, tenant: str) -> dict[str, StoredObject]:
        if coll.multi_tenancy:
            if not tenant:
                raise _Abort(
                    f"class {coll.name} has multi-tenancy enabled, but request was without tenant"
                )
            if tenant not in coll.shards:
                raise _Abort(f'tenant not found: "{tenant}"')
            return coll.shards[tenant]
        if tenant:
            raise _Abort(
                f"class {coll.name} has multi-tenancy disabled, but request was with tenant"
            )
        return coll.shards[None]

    def _search(self, request: search_get_pb2.SearchRequest, malformed: set[str]):
        with self._lock:
            self.searches.append(request)
            coll = self._collections.get(request.collection)
            if coll is None:
                raise _Abort(f"could not find class {request.collection} in schema")
            shard = self._shard(coll, request.tenant)
            all_objects = list(shard.values())
            schema = dict(coll.properties)
        where = request.filters if request.HasField("filters") else None
        allowed = [o for o in all_objects if where is None or _matches(where, o, schema, coll.name)]
        limit = request.limit or DEFAULT_LIMIT
        offset = request.offset

        scored: list[tuple[StoredObject, dict[str, Any]]]
        if request.HasField("bm25_search"):
            bm25 = request.bm25_search
            scores = _bm25(bm25.query, list(bm25.properties), all_objects, allowed, schema)
            scored = [(o, {"score": s}) for o, s in scores]
        elif request.HasField("near_vector"):
            nv = request.near_vector
            target, vector = _query_vector(nv, nv.targets, list(nv.target_vectors))
            if vector is None:
                raise _Abort("near_vector: no vector given")
            dists = _vector_search(vector, target, allowed, coll.name)
            if nv.HasField("distance"):
                dists = [(o, d) for o, d in dists if d <= nv.distance]
            if nv.HasField("certainty"):
                dists = [(o, d) for o, d in dists if 1 - d / 2 >= nv.certainty]
            scored = [(o, {"distance": d, "certainty": 1 - d / 2}) for o, d in dists]
        elif request.HasField("hybrid_search"):
            scored = _hybrid(request.hybrid_search, all_objects, allowed, schema, coll.name)
        else:
            scored = [(o, {}) for o in sorted(allowed, key=lambda o: o.uuid)]

        page = scored[offset : offset + limit]
        results = [_search_result(obj, meta, request, coll.name, malformed) for obj, meta in page]
        return search_get_pb2.SearchReply(took=0.001, results=results)

    def _batch_objects(self, request: batch_pb2.BatchObjectsRequest):
        errors = []
        with self._lock:
            for index, obj in enumerate(request.objects):
                try:
                    coll = self._collections.get(obj.collection)
                    if coll is None:
                        raise _Abort(f'class "{obj.collection}" not found in schema')
                    shard = self._shard(coll, obj.tenant)
                    try:
                        uid = str(uuid_lib.UUID(obj.uuid))
                    except ValueError:
                        raise _Abort(f"invalid uuid {obj.uuid!r}") from None
                    properties = _batch_properties(obj.properties, coll.properties)
                    for key, value in properties.items():
                        coll.properties.setdefault(key, _infer_type(value, grpc_struct=True))
                    shard[uid] = StoredObject(uid, properties, _batch_vectors(obj))
                except _Abort as exc:
                    errors.append(
                        batch_pb2.BatchObjectsReply.BatchError(index=index, error=exc.message)
                    )
        return batch_pb2.BatchObjectsReply(took=0.001, errors=errors)

    def _batch_delete(self, request: batch_delete_pb2.BatchDeleteRequest):
        with self._lock:
            coll = self._collections.get(request.collection)
            if coll is None:
                raise _Abort(f"could not find class {request.collection} in schema")
            tenant = request.tenant if request.HasField("tenant") else ""
            shard = self._shard(coll, tenant)
            if not request.HasField("filters"):
                raise _Abort("batch delete: filters are required")
            schema = dict(coll.properties)
            matched = [o for o in shard.values() if _matches(request.filters, o, schema, coll.name)]
            if not request.dry_run:
                for obj in matched:
                    shard.pop(obj.uuid, None)
        objects = (
            [
                batch_delete_pb2.BatchDeleteObject(
                    uuid=uuid_lib.UUID(o.uuid).bytes, successful=not request.dry_run
                )
                for o in matched
            ]
            if request.verbose
            else []
        )
        return batch_delete_pb2.BatchDeleteReply(
            took=0.001,
            matches=len(matched),
            successful=0 if request.dry_run else len(matched),
            failed=0,
            objects=objects,
        )

    def _tenants_get(self, request: tenants_pb2.TenantsGetRequest):
        with self._lock:
            coll = self._collections.get(request.collection)
            if coll is None:
                raise _Abort(f"could not find class {request.collection} in schema")
            if not coll.multi_tenancy:
                raise _Abort(f"multi-tenancy is not enabled for class {coll.name!r}")
            names = sorted(t for t in coll.shards if t is not None)
        wanted = set(request.names.values) if request.HasField("names") else None
        return tenants_pb2.TenantsGetReply(
            took=0.001,
            tenants=[
                tenants_pb2.Tenant(
                    name=name, activity_status=tenants_pb2.TENANT_ACTIVITY_STATUS_HOT
                )
                for name in names
                if wanted is None or name in wanted
            ],
        )

    # -- REST (called by _RestHandler) ---------------------------------------------------------

    def _class_json(self, coll: _Collection) -> dict[str, Any]:
        return {
            "class": coll.name,
            "description": "",
            "invertedIndexConfig": {
                "bm25": {"b": _BM25_B, "k1": _BM25_K1},
                "cleanupIntervalSeconds": 60,
                "stopwords": {"additions": None, "preset": "en", "removals": None},
                "indexTimestamps": False,
                "indexNullState": False,
                "indexPropertyLength": False,
            },
            "multiTenancyConfig": {
                "enabled": coll.multi_tenancy,
                "autoTenantCreation": False,
                "autoTenantActivation": False,
            },
            "properties": [
                {
                    "name": name,
                    "dataType": [dtype],
                    "indexFilterable": True,
                    "indexSearchable": dtype in {"text", "text[]"},
                    "indexRangeFilters": False,
                    **({"tokenization": "word"} if dtype in {"text", "text[]"} else {}),
                }
                for name, dtype in coll.properties.items()
            ],
            "replicationConfig": {
                "asyncEnabled": False,
                "deletionStrategy": "NoAutomatedResolution",
                "factor": 1,
            },
            "shardingConfig": {
                "actualCount": 1,
                "actualVirtualCount": 128,
                "desiredCount": 1,
                "desiredVirtualCount": 128,
                "function": "murmur3",
                "key": "_id",
                "strategy": "hash",
                "virtualPerPhysical": 128,
            },
            "vectorIndexConfig": _HNSW_CONFIG,
            "vectorIndexType": "hnsw",
            "vectorizer": "none",
        }

    def _rest(self, method: str, path: str, headers: Mapping[str, str]):
        """(status, body or None) for one REST request."""
        name = f"{method} {path}"
        with self._lock:
            self.requests.append(name)
        public = path.startswith("/v1/.well-known/")
        if not public:
            problem = self._auth_error(headers.get("authorization"))
            if problem is not None:
                return 401, {"code": 401, "message": problem}
        bad_json = False
        for fault in self._take_faults(name):
            if fault.seconds:
                self._sleep(fault.seconds)
            if fault.status is not None:
                return fault.status, {"error": [{"message": fault.message}]}
            if fault.malform == "bad_json":
                bad_json = True
        if bad_json:
            return 200, b"<html>not json</html>"
        if method != "GET":
            return 405, {"error": [{"message": f"method {method} not allowed on {path}"}]}
        if path == "/v1/meta":
            return 200, {
                "hostname": "http://[::]:8080",
                "modules": {},
                "version": self.version,
                "grpcMaxMessageSize": GRPC_MAX_MESSAGE_SIZE,
            }
        if path in {"/v1/.well-known/ready", "/v1/.well-known/live"}:
            return 200, None
        if path == "/v1/.well-known/openid-configuration":
            return 404, {"error": [{"message": "OIDC is not configured"}]}
        with self._lock:
            if path == "/v1/schema":
                return 200, {"classes": [self._class_json(c) for c in self._collections.values()]}
            if path.startswith("/v1/schema/") and path.count("/") == 3:
                coll = self._collections.get(path.rsplit("/", 1)[1])
                if coll is None:
                    return 404, None
                return 200, self._class_json(coll)
        return 404, {"error": [{"message": f"no route for {method} {path}"}]}


# -- gRPC plumbing ------------------------------------------------------------------------------


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, state: WeaviateTestServer) -> None:
        self.state = state

    def _run(self, name: str, context, work):
        malformed = self.state._grpc_enter(name, context)
        try:
            return work(malformed)
        except _Abort as exc:
            context.abort(exc.code, exc.message)

    def Search(self, request, context):
        return self._run("Search", context, lambda m: self.state._search(request, m))

    def BatchObjects(self, request, context):
        return self._run("BatchObjects", context, lambda m: self.state._batch_objects(request))

    def BatchDelete(self, request, context):
        return self._run("BatchDelete", context, lambda m: self.state._batch_delete(request))

    def TenantsGet(self, request, context):
        return self._run("TenantsGet", context, lambda m: self.state._tenants_get(request))


def _health_handler(state: WeaviateTestServer) -> grpc.GenericRpcHandler:
    def check(request, context):
        state._grpc_enter("Health", context)
        return health_weaviate_pb2.WeaviateHealthCheckResponse(
            status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING
        )

    return grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {
            "Check": grpc.unary_unary_rpc_method_handler(
                check,
                request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
                response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString,
            )
        },
    )


class _RestHandler(BaseHTTPRequestHandler):
    server_state: WeaviateTestServer
    protocol_version = "HTTP/1.1"

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, body = self.server_state._rest(method, path, headers)
        payload = (
            body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


# -- values -------------------------------------------------------------------------------------


def _infer_type(value: Any, *, grpc_struct: bool = False) -> str:
    """The data type Weaviate's auto-schema gives a first value (numbers arriving in a gRPC
    ``Struct`` are all doubles, so they become ``number``)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "number" if grpc_struct else "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        if not value:
            return "text[]"
        return _infer_type(value[0], grpc_struct=grpc_struct) + "[]"
    return "text"


def _to_value(value: Any) -> properties_pb2.Value:
    if value is None:
        return properties_pb2.Value(null_value=struct_pb2.NULL_VALUE)
    if isinstance(value, bool):
        return properties_pb2.Value(bool_value=value)
    if isinstance(value, int):
        return properties_pb2.Value(int_value=value)
    if isinstance(value, float):
        return properties_pb2.Value(number_value=value)
    if isinstance(value, str):
        return properties_pb2.Value(text_value=value)
    if isinstance(value, uuid_lib.UUID):
        return properties_pb2.Value(uuid_value=str(value))
    if isinstance(value, Mapping):
        return properties_pb2.Value(object_value=_to_properties(value))
    if isinstance(value, list | tuple):
        return properties_pb2.Value(list_value=_to_list_value(list(value)))
    return properties_pb2.Value(text_value=str(value))


def _to_list_value(values: list[Any]) -> properties_pb2.ListValue:
    if values and all(isinstance(v, bool) for v in values):
        return properties_pb2.ListValue(bool_values=properties_pb2.BoolValues(values=values))
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        packed = struct.pack(f"<{len(values)}q", *values)
        return properties_pb2.ListValue(int_values=properties_pb2.IntValues(values=packed))
    if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        packed = struct.pack(f"<{len(values)}d", *values)
        return properties_pb2.ListValue(number_values=properties_pb2.NumberValues(values=packed))
    if values and all(isinstance(v, Mapping) for v in values):
        return properties_pb2.ListValue(
            object_values=properties_pb2.ObjectValues(values=[_to_properties(v) for v in values])
        )
    return properties_pb2.ListValue(
        text_values=properties_pb2.TextValues(values=[str(v) for v in values])
    )


def _to_properties(mapping: Mapping[str, Any]) -> properties_pb2.Properties:
    return properties_pb2.Properties(fields={k: _to_value(v) for k, v in mapping.items()})


def _batch_properties(props: batch_pb2.BatchObject.Properties, schema: Mapping[str, str]):
    """A ``BatchObject``'s properties as Python values."""
    out: dict[str, Any] = {}
    if props.HasField("non_ref_properties"):
        for key, value in json_format.MessageToDict(props.non_ref_properties).items():
            if isinstance(value, float) and schema.get(key) == "int" and value.is_integer():
                value = int(value)
            out[key] = value
    out.update(_array_properties(props))
    for obj in props.object_properties:
        out[obj.prop_name] = _object_value(obj.value)
    for arr in props.object_array_properties:
        out[arr.prop_name] = [_object_value(v) for v in arr.values]
    for name in props.empty_list_props:
        out[name] = []
    return out


def _array_properties(props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arr in props.text_array_properties:
        out[arr.prop_name] = list(arr.values)
    for arr in props.int_array_properties:
        out[arr.prop_name] = [int(v) for v in arr.values]
    for arr in props.boolean_array_properties:
        out[arr.prop_name] = [bool(v) for v in arr.values]
    for arr in props.number_array_properties:
        if arr.values_bytes:
            count = len(arr.values_bytes) // 8
            out[arr.prop_name] = list(struct.unpack(f"<{count}d", arr.values_bytes))
        else:
            out[arr.prop_name] = [float(v) for v in arr.values]
    return out


def _object_value(value: base_pb2.ObjectPropertiesValue) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if value.HasField("non_ref_properties"):
        out.update(json_format.MessageToDict(value.non_ref_properties))
    out.update(_array_properties(value))
    for obj in value.object_properties:
        out[obj.prop_name] = _object_value(obj.value)
    for arr in value.object_array_properties:
        out[arr.prop_name] = [_object_value(v) for v in arr.values]
    for name in value.empty_list_props:
        out[name] = []
    return out


def _floats(raw: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _batch_vectors(obj: batch_pb2.BatchObject) -> dict[str, list[float]]:
    vectors: dict[str, list[float]] = {}
    if obj.vector_bytes:
        vectors["default"] = _floats(obj.vector_bytes)
    elif len(obj.vector):
        vectors["default"] = [float(x) for x in obj.vector]
    for vec in obj.vectors:
        if vec.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
            raise _Abort(f"multi-vector {vec.name!r} is not supported by the test server")
        vectors[vec.name or "default"] = _floats(vec.vector_bytes)
    return vectors


# -- search -------------------------------------------------------------------------------------


def _search_result(
    obj: StoredObject,
    meta: Mapping[str, Any],
    request: search_get_pb2.SearchRequest,
    collection: str,
    malformed: set[str],
) -> search_get_pb2.SearchResult:
    if "drop_properties" in malformed:
        properties: dict[str, Any] = {}
    elif request.HasField("properties") and not request.properties.return_all_nonref_properties:
        wanted = set(request.properties.non_ref_properties)
        properties = {k: v for k, v in obj.properties.items() if k in wanted}
    else:
        properties = obj.properties
    result_meta = search_get_pb2.MetadataResult(
        id=obj.uuid, id_as_bytes=uuid_lib.UUID(obj.uuid).bytes
    )
    asked = request.metadata if request.HasField("metadata") else None
    if "no_score" not in malformed and asked is not None:
        if asked.score and "score" in meta:
            result_meta.score = meta["score"]
            result_meta.score_present = True
        if asked.explain_score and "explain" in meta:
            result_meta.explain_score = meta["explain"]
            result_meta.explain_score_present = True
        if asked.distance and "distance" in meta:
            result_meta.distance = meta["distance"]
            result_meta.distance_present = True
        if asked.certainty and "certainty" in meta:
            result_meta.certainty = meta["certainty"]
            result_meta.certainty_present = True
    if asked is not None and (asked.vector or len(asked.vectors)):
        for name, vec in obj.vectors.items():
            if asked.vector and name == "default":
                result_meta.vector_bytes = struct.pack(f"<{len(vec)}f", *vec)
            elif name in asked.vectors:
                result_meta.vectors.append(
                    base_pb2.Vectors(
                        name=name,
                        vector_bytes=struct.pack(f"<{len(vec)}f", *vec),
                        type=base_pb2.Vectors.VECTOR_TYPE_SINGLE_FP32,
                    )
                )
    return search_get_pb2.SearchResult(
        properties=search_get_pb2.PropertiesResult(
            non_ref_props=_to_properties(properties), target_collection=collection
        ),
        metadata=result_meta,
    )


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return " ".join(v for v in value if isinstance(v, str))
    return ""


def _bm25(
    query: str,
    properties: list[str],
    corpus: list[StoredObject],
    allowed: list[StoredObject],
    schema: Mapping[str, str],
) -> list[tuple[StoredObject, float]]:
    """BM25 summed over the searched properties; statistics over the whole shard."""
    terms = [t for t in tokenize(query) if t not in EN_STOPWORDS]
    if not terms:
        return []
    searched = (
        [p for p in properties if p in schema]
        if properties
        else [name for name, dtype in schema.items() if dtype in {"text", "text[]"}]
    )
    n_docs = len(corpus) or 1
    scores: dict[str, float] = {}
    allowed_ids = {o.uuid for o in allowed}
    for prop in searched:
        docs = {o.uuid: tokenize(_text_of(o.properties.get(prop))) for o in corpus}
        lengths = [len(t) for t in docs.values()]
        avg = (sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0
        for term in set(terms):
            df = sum(1 for tokens in docs.values() if term in tokens)
            if not df:
                continue
            idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
            weight = terms.count(term)
            for uid, tokens in docs.items():
                if uid not in allowed_ids:
                    continue
                tf = tokens.count(term)
                if not tf:
                    continue
                norm = tf + _BM25_K1 * (1 - _BM25_B + _BM25_B * len(tokens) / avg)
                scores[uid] = scores.get(uid, 0.0) + weight * idf * tf * (_BM25_K1 + 1) / norm
    by_id = {o.uuid: o for o in allowed}
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [(by_id[uid], score) for uid, score in ranked if score > 0]


def _unpack_vectors(vectors: Sequence[base_pb2.Vectors]) -> list[float] | None:
    for vec in vectors:
        if vec.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
            raise _Abort("multi-vector queries are not supported by the test server")
        return _floats(vec.vector_bytes)
    return None


def _query_vector(
    message: Any, targets: base_search_pb2.Targets | None, legacy_targets: list[str]
) -> tuple[str | None, list[float] | None]:
    """(target vector name or None, query vector) from a NearVector-like message."""
    names = list(targets.target_vectors) if targets is not None else []
    names = names or legacy_targets
    if len(set(names)) > 1:
        raise _Abort("the test server supports one target vector per query")
    target = names[0] if names else None
    vector: list[float] | None = None
    if getattr(message, "vector_bytes", b""):
        vector = _floats(message.vector_bytes)
    elif len(getattr(message, "vectors", ())):
        vector = _unpack_vectors(message.vectors)
    elif len(getattr(message, "vector_for_targets", ())):
        first = message.vector_for_targets[0]
        target = target or first.name
        vector = (
            _floats(first.vector_bytes) if first.vector_bytes else _unpack_vectors(first.vectors)
        )
    elif len(getattr(message, "vector", ())):
        vector = [float(x) for x in message.vector]
    return target, vector


def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - (dot / norm if norm else 0.0)


def _vector_search(
    vector: list[float], target: str | None, objects: list[StoredObject], collection: str
) -> list[tuple[StoredObject, float]]:
    names = {name for o in objects for name in o.vectors}
    if target is None:
        if "default" in names or not names:
            target = "default"
        elif len(names) == 1:
            target = next(iter(names))
        else:
            raise _Abort(
                f"class {collection} has multiple vectors, but no target vectors were provided"
            )
    elif names and target not in names:
        raise _Abort(f'target vector "{target}" does not exist for class {collection}')
    out = []
    for obj in objects:
        vec = obj.vectors.get(target)
        if vec is None:
            continue
        if len(vec) != len(vector):
            raise _Abort(
                f"vector search: knn search: vector lengths don't match: {len(vec)} vs "
                f"{len(vector)}"
            )
        out.append((obj, _cosine_distance(vector, vec)))
    out.sort(key=lambda item: (item[1], item[0].uuid))
    return out


def _hybrid(
    hybrid: base_search_pb2.Hybrid,
    corpus: list[StoredObject],
    allowed: list[StoredObject],
    schema: Mapping[str, str],
    collection: str,
) -> list[tuple[StoredObject, dict[str, Any]]]:
    if hybrid.use_alpha_param:
        alpha = hybrid.alpha_param if hybrid.HasField("alpha_param") else 0.75
    else:
        alpha = hybrid.alpha
    targets = hybrid.targets if hybrid.HasField("targets") else None
    target, vector = _query_vector(hybrid, targets, list(hybrid.target_vectors))
    if vector is None and hybrid.HasField("near_vector"):
        nv = hybrid.near_vector
        nv_targets = nv.targets if nv.HasField("targets") else targets
        target, vector = _query_vector(nv, nv_targets, list(nv.target_vectors) or [target or ""])
        target = target or None
    if vector is None and alpha > 0:
        raise _Abort(
            f"hybrid search: class {collection} has no vectorizer; provide a vector or use alpha=0"
        )
    lexical = _bm25(hybrid.query, list(hybrid.properties), corpus, allowed, schema)
    dense = _vector_search(vector, target, allowed, collection) if vector is not None else []
    if hybrid.HasField("vector_distance"):
        dense = [(o, d) for o, d in dense if d <= hybrid.vector_distance]
    fused: dict[str, float] = {}
    objects: dict[str, StoredObject] = {}
    ranked_fusion = hybrid.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RANKED
    for weight, results, higher_better in (
        (1 - alpha, lexical, True),
        (alpha, dense, False),
    ):
        if weight <= 0 or not results:
            continue
        values = [v for _, v in results]
        low, high = min(values), max(values)
        for rank, (obj, value) in enumerate(results):
            if ranked_fusion:
                part = 1.0 / (60 + rank)
            elif high == low:
                part = 1.0
            else:
                part = (
                    (value - low) / (high - low) if higher_better else (high - value) / (high - low)
                )
            objects[obj.uuid] = obj
            fused[obj.uuid] = fused.get(obj.uuid, 0.0) + weight * part
    ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    method = "rankedFusion" if ranked_fusion else "relativeScoreFusion"
    return [
        (objects[uid], {"score": score, "explain": f"(Hybrid) {method}, alpha {alpha}"})
        for uid, score in ranked
    ]


# -- filters ------------------------------------------------------------------------------------


def _filter_value(where: base_pb2.Filters) -> tuple[str, Any]:
    kind = where.WhichOneof("test_value")
    if kind is None:
        raise _Abort("filter without a value")
    raw = getattr(where, kind)
    if kind.endswith("_array"):
        return kind, list(raw.values)
    if kind == "value_geo":
        raise _Abort("geo filters are not supported by the test server")
    return kind, raw


def _check_value_type(kind: str, dtype: str, prop: str) -> str:
    base = dtype.removesuffix("[]")
    family = {
        "value_text": "text",
        "value_text_array": "text",
        "value_int": "num",
        "value_int_array": "num",
        "value_number": "num",
        "value_number_array": "num",
        "value_boolean": "boolean",
        "value_boolean_array": "boolean",
    }[kind]
    wanted = {"text": "text", "uuid": "text", "date": "text", "int": "num", "number": "num"}
    expected = wanted.get(base, base)
    if family != expected:
        raise _Abort(
            f'data type filter cannot use "{_VALUE_NAMES[kind]}" on type "{base}", use '
            f'"{_VALUE_FOR_TYPE.get(base, "valueText")}" instead'
        )
    return base


def _equal(candidate: Any, value: Any, base: str) -> bool:
    if candidate is None:
        return False
    if base == "text":
        if not isinstance(candidate, str):
            return False
        wanted = tokenize(str(value))
        have = set(tokenize(candidate))
        return bool(wanted) and all(t in have for t in wanted)
    if base == "uuid":
        return str(candidate).lower() == str(value).lower()
    if base == "boolean":
        return isinstance(candidate, bool) and candidate is bool(value)
    if base in {"int", "number"}:
        if isinstance(candidate, bool) or not isinstance(candidate, int | float):
            return False
        return float(candidate) == float(value)
    return candidate == value


def _compare(candidate: Any, value: Any, op: int) -> bool:
    if candidate is None or isinstance(candidate, bool | Mapping):
        return False
    try:
        if op == _Op.OPERATOR_GREATER_THAN:
            return candidate > value
        if op == _Op.OPERATOR_GREATER_THAN_EQUAL:
            return candidate >= value
        if op == _Op.OPERATOR_LESS_THAN:
            return candidate < value
        return candidate <= value
    except TypeError:
        return False


def _matches(where: base_pb2.Filters, obj: StoredObject, schema: Mapping[str, str], cls: str):
    op = where.operator
    if op == _Op.OPERATOR_AND:
        return all(_matches(f, obj, schema, cls) for f in where.filters)
    if op == _Op.OPERATOR_OR:
        return any(_matches(f, obj, schema, cls) for f in where.filters)
    if op == _Op.OPERATOR_NOT:
        return not any(_matches(f, obj, schema, cls) for f in where.filters)
    if where.HasField("target"):
        if where.target.WhichOneof("target") != "property":
            raise _Abort("reference filters are not supported by the test server")
        prop = where.target.property
    elif len(where.on) == 1:
        prop = where.on[0]
    else:
        raise _Abort(f"paths needs to have a uneven number of components, got {list(where.on)}")
    if prop == "_id":
        dtype, current = "uuid", obj.uuid
    else:
        if prop not in schema:
            raise _Abort(
                f"no such prop with name '{prop}' found in class '{cls}' in the schema. Check "
                "your schema files for which properties in this class are available"
            )
        dtype, current = schema[prop], obj.properties.get(prop)
    if op == _Op.OPERATOR_IS_NULL:
        return (current is None or current == []) == bool(where.value_boolean)
    kind, value = _filter_value(where)
    base = _check_value_type(kind, dtype, prop)
    if kind in {"value_int", "value_number"} and base == "int" and float(value) != int(value):
        raise _Abort(f"filtering for integer, but received a floating point number {value}")
    candidates = current if isinstance(current, list) else [current]
    if op in {_Op.OPERATOR_EQUAL, _Op.OPERATOR_NOT_EQUAL}:
        values = value if isinstance(value, list) else [value]
        hit = any(_equal(c, v, base) for c in candidates for v in values)
        return hit if op == _Op.OPERATOR_EQUAL else not hit
    if op in {_Op.OPERATOR_CONTAINS_ANY, _Op.OPERATOR_CONTAINS_ALL, _Op.OPERATOR_CONTAINS_NONE}:
        values = value if isinstance(value, list) else [value]
        found = [any(_equal(c, v, base) for c in candidates) for v in values]
        if op == _Op.OPERATOR_CONTAINS_ANY:
            return any(found)
        if op == _Op.OPERATOR_CONTAINS_ALL:
            return all(found)
        return not any(found)
    if op in {
        _Op.OPERATOR_GREATER_THAN,
        _Op.OPERATOR_GREATER_THAN_EQUAL,
        _Op.OPERATOR_LESS_THAN,
        _Op.OPERATOR_LESS_THAN_EQUAL,
    }:
        return any(_compare(c, value, op) for c in candidates)
    if op == _Op.OPERATOR_LIKE:
        pattern = str(value).lower()
        return any(
            isinstance(c, str) and fnmatch.fnmatchcase(c.lower(), pattern) for c in candidates
        )
    raise _Abort(f"unknown filter operator {op}")
