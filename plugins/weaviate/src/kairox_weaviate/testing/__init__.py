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
  :meth:`~WeaviateTestServer.delay` (slow replies), :meth:`~WeaviateTestServer.malformed`
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

from kairox_weaviate.testing.engine import StoredObject, TestCollection, tokenize
from kairox_weaviate.testing.server import WeaviateTestServer
from kairox_weaviate.testing.store import WeaviateStore

__all__ = ["StoredObject", "TestCollection", "WeaviateStore", "WeaviateTestServer", "tokenize"]
