"""kairox-weaviate: the ``weaviate`` knowledge-base kind (weaviate-client v4, gRPC search).

``WeaviateConfig`` validates a ``[knowledge_bases.<id>]`` table with ``kind = "weaviate"``,
``WeaviateSource`` serves it (``retrieve`` by BM25, near-vector or hybrid search;
``upsert_vectors``/``delete_vectors`` for ``kairox kb sync``), and the hook at the bottom
registers the kind. ``kairox_weaviate.testing`` has a loopback Weaviate for tests.

Importing this module imports neither ``weaviate`` nor ``grpc``: Kairox imports every plugin
at start-up, so the client loads on first use.
"""

from __future__ import annotations

import os

from kairox import BuildContext, KnowledgeBaseKind, registers
from kairox_weaviate.config import WeaviateConfig
from kairox_weaviate.errors import (
    INSTALL_HINT,
    WeaviateAuthError,
    WeaviateDeadlineError,
    WeaviateNotFoundError,
    WeaviateReplyError,
    WeaviateSourceError,
    WeaviateTimeoutError,
    load_client,
    require_client,
)
from kairox_weaviate.filters import build_filter
from kairox_weaviate.source import WeaviateSource

__all__ = [
    "INSTALL_HINT",
    "WeaviateAuthError",
    "WeaviateConfig",
    "WeaviateDeadlineError",
    "WeaviateNotFoundError",
    "WeaviateReplyError",
    "WeaviateSource",
    "WeaviateSourceError",
    "WeaviateTimeoutError",
    "build_filter",
    "build_source",
    "kairox_register_knowledge_base_kinds",
    "load_client",
    "require_client",
]


def build_source(kb_id: str, config: WeaviateConfig, ctx: BuildContext) -> WeaviateSource:
    """The kind's factory: import the client (an ``ImportError`` with the install hint if
    it is missing; importing here keeps its half second out of the first query's
    deadline), check the API key variable is set, resolve the embedding backend
    (near_vector and hybrid), and build the source. Nothing connects until the first query. Without ``embedding_backend`` (bm25), the sync target's
    ``embedding_backend`` is the workspace's (``[workspace] embedding_backend``)."""
    load_client()
    env = config.api_key_env
    if env is not None and not os.environ.get(env):
        raise WeaviateAuthError(
            f"knowledge base {kb_id!r}: api_key_env names the environment variable {env}, "
            f"which is not set; export {env}=<your Weaviate API key>"
        )
    embedder = None
    if config.mode != "bm25":
        assert config.embedding_backend is not None  # the config model requires it
        embedder = ctx.embedding_backend(config.embedding_backend)
    # A bm25 knowledge base may name no backend; `kairox kb sync` then pushes the
    # workspace index's vectors, so those are the vectors the collection will hold.
    workspace_backend = ctx.workspace.embedding_backend if ctx.workspace else None
    return WeaviateSource(kb_id, config, embedder=embedder, sync_backend=workspace_backend)


kairox_register_knowledge_base_kinds = registers(
    KnowledgeBaseKind(
        name="weaviate",
        config_model=WeaviateConfig,
        factory=build_source,
        description="A Weaviate collection (weaviate-client v4, gRPC): bm25, "
        "near_vector or hybrid.",
    )
)
