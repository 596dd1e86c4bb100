"""The loopback Weaviate's two servers (gRPC and REST) on 127.0.0.1: lifecycle, auth,
fault injection and request counting; the state and answers are :mod:`.store`'s."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from weaviate.proto.v1 import (
    health_weaviate_pb2,
    weaviate_pb2_grpc,
)

from kairox.testing.loopback import Fault, LoopbackServer, RecordedRequest
from kairox_weaviate.testing.engine import (
    _BM25_B,
    _BM25_K1,
    TestCollection,
    _Abort,
    _Collection,
)
from kairox_weaviate.testing.store import WeaviateStore

#: The Weaviate version ``/v1/meta`` reports; the client needs at least 1.27.0.
DEFAULT_VERSION = "1.32.0"
#: What ``/v1/meta`` says about the largest gRPC message (Weaviate's default, 100 MB).
GRPC_MAX_MESSAGE_SIZE = 104_858_000

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


class WeaviateTestServer(WeaviateStore, LoopbackServer):
    """A Weaviate stand-in on two loopback ports (REST and gRPC); a context manager.

    :param collections: the collections that exist from the start: names, or
        :class:`TestCollection` for multi-tenancy and declared property types.
    :param api_key: when set, every request but the health probes must carry
        ``Authorization: Bearer <api_key>``.
    :param version: the Weaviate version ``/v1/meta`` reports; the client picks its
        request encoding from it (named-vector ``vectors`` from 1.29, ``alpha_param``
        from 1.36.6...).

    Lifecycle, records and faults are :class:`~kairox.testing.loopback.LoopbackServer`'s;
    :attr:`url` is the REST endpoint (``http_port``), ``grpc_port`` the gRPC one. A fault's
    ``target`` is a gRPC method (``"Search"``, ``"BatchObjects"``, ``"BatchDelete"``,
    ``"TenantsGet"``, ``"Health"``) or a REST ``"METHOD /path"`` prefix; :meth:`fail` takes a
    gRPC status (``"UNAVAILABLE"``, ``grpc.StatusCode.RESOURCE_EXHAUSTED``) for a gRPC
    target and an HTTP status for a REST one; :meth:`malformed` takes a ``mode``:
    ``"drop_properties"`` (search results without any property), ``"no_score"`` (without
    score or distance) or ``"bad_json"`` (a REST body that is not JSON).
    """

    THROTTLE_ERROR = "RESOURCE_EXHAUSTED"
    MALFORMED_MODES = frozenset({"drop_properties", "no_score", "bad_json"})

    def __init__(
        self,
        collections: Iterable[str | TestCollection] = (),
        api_key: str | None = None,
        *,
        version: str = DEFAULT_VERSION,
    ) -> None:
        WeaviateStore.__init__(self, collections)
        LoopbackServer.__init__(self)
        self.api_key = api_key
        self.version = version
        self._pool: futures.ThreadPoolExecutor | None = None
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    # -- lifecycle --------------------------------------------------------------------------

    def _serve(self) -> int:
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
        return self.http_port

    def _shutdown(self) -> None:
        # Requests in flight are cut off.
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

    # -- faults and records ------------------------------------------------------------------

    def _check_error(self, error: int | str | grpc.StatusCode, target: str | None) -> Any:
        rest = target is not None and " " in target
        grpc_target = target is not None and not rest
        if isinstance(error, int):
            if grpc_target:
                raise ValueError(f"target {target!r} needs a gRPC status, got {error!r}")
            return error
        if rest:
            raise ValueError(f"target {target!r} needs an HTTP status, got {error!r}")
        return error if isinstance(error, grpc.StatusCode) else grpc.StatusCode[error]

    def malformed(
        self,
        times: int | None = 1,
        *,
        target: str | None = "Search",
        after: int = 0,
        body: bytes | str | None = None,
        mode: str = "drop_properties",
        **details: Any,
    ) -> None:
        """Send broken replies to ``target`` (see the class docs for the modes)."""
        if mode not in self.MALFORMED_MODES:
            raise ValueError(
                f"unknown malform mode {mode!r}; one of {sorted(self.MALFORMED_MODES)}"
            )
        super().malformed(times, target=target, after=after, body=body, mode=mode, **details)

    def clear_requests(self) -> None:
        super().clear_requests()
        with self._lock:
            self.searches.clear()

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
        metadata = {key.lower(): value for key, value in context.invocation_metadata()}
        request = RecordedRequest("GRPC", name, headers=metadata)
        self._record(request)
        if name != "Health":
            problem = self._auth_error(metadata.get("authorization"))
            if problem is not None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)
        delay = self.faults.take("delay", request)
        if delay is not None:
            self._sleep(delay.seconds, context.is_active)
        if self.faults.take("disconnect", request) is not None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "Connection reset by peer")
        failure = self.faults.take("fail", request, accepts=_grpc_fault)
        if failure is not None:
            context.abort(failure.error, failure.message or "injected by WeaviateTestServer")
        bad = self.faults.take("malformed", request)
        return {bad.details["mode"]} if bad is not None else set()

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
        request = RecordedRequest(method, path, headers=dict(headers))
        self._record(request)
        public = path.startswith("/v1/.well-known/")
        if not public:
            problem = self._auth_error(headers.get("authorization"))
            if problem is not None:
                return 401, {"code": 401, "message": problem}
        delay = self.faults.take("delay", request)
        if delay is not None:
            self._sleep(delay.seconds)
        if self.faults.take("disconnect", request) is not None:
            return 0, None
        failure = self.faults.take("fail", request, accepts=_rest_fault)
        if failure is not None:
            message = failure.message or "injected by WeaviateTestServer"
            return failure.error, {"error": [{"message": message}]}
        bad = self.faults.take("malformed", request)
        if bad is not None and bad.details["mode"] == "bad_json":
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


def _grpc_fault(fault: Fault) -> bool:
    return isinstance(fault.error, grpc.StatusCode)


def _rest_fault(fault: Fault) -> bool:
    return isinstance(fault.error, int)


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
        if status == 0:  # disconnect(): no reply at all
            self.close_connection = True
            return
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

    def _serve(self) -> None:
        self._handle(self.command)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass
