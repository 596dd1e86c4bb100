"""The loopback Weaviate's state and its answers to gRPC requests."""

from __future__ import annotations

import threading
import uuid as uuid_lib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from weaviate.proto.v1 import (
    batch_delete_pb2,
    batch_pb2,
    search_get_pb2,
    tenants_pb2,
)

from kairox_weaviate.testing.engine import (
    DEFAULT_LIMIT,
    StoredObject,
    TestCollection,
    _Abort,
    _bm25,
    _Collection,
    _hybrid,
    _matches,
    _query_vector,
    _vector_search,
)
from kairox_weaviate.testing.protobuf import (
    _batch_properties,
    _batch_vectors,
    _infer_type,
    _search_result,
)


class WeaviateStore:
    """The loopback Weaviate's collections, tenants and objects, and its answers to the
    gRPC ``Search``, ``BatchObjects``, ``BatchDelete`` and ``TenantsGet`` requests (after
    :class:`~kairox_weaviate.testing.server.WeaviateTestServer` has counted, authenticated
    and applied its faults)."""

    def __init__(self, collections: Iterable[str | TestCollection] = ()) -> None:
        #: every ``SearchRequest`` received (after auth and faults), oldest first
        self.searches: list[search_get_pb2.SearchRequest] = []
        self._lock = threading.RLock()
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

    # -- gRPC requests (called by the server once a request is let through) ------------

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
