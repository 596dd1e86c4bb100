"""Shared fixtures: loopback Weaviate servers and sources built the way Kairox builds them.

Helpers are fixtures (not imports from this file) so the tests run under any pytest
import mode, including the repository root's ``--import-mode=importlib``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence

import kairox_weaviate
import numpy as np
import pytest
from kairox_weaviate.testing import WeaviateTestServer

from kairox import testing
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.testing import CORPUS, CountingEmbedder, check_kind_registration

CORPUS_COLLECTION = "Corpus"


class TableEmbedder:
    """A tiny backend with hand-picked vectors (unknown texts get a fixed vector)."""

    def __init__(self, table: dict[str, Sequence[float]], dim: int = 3, name: str = "table-3"):
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.dim = dim
        self.name = name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        fallback = np.full(self.dim, 1 / np.sqrt(self.dim), dtype=np.float32)
        return np.vstack([self.table.get(t, fallback) for t in texts] or np.zeros((0, self.dim)))


def corpus_objects() -> list[dict]:
    return [
        {
            "text": doc.text,
            "title": doc.title,
            "uri": doc.uri,
            "doc_id": doc.id,
            **doc.metadata,
        }
        for doc in CORPUS
    ]


def seed_corpus(server: WeaviateTestServer, collection: str = CORPUS_COLLECTION, **kw) -> None:
    embedder = HashingEmbedder()
    vectors = embedder.embed([f"{d.title}. {d.text}" for d in CORPUS])
    server.seed(collection, corpus_objects(), [list(map(float, v)) for v in vectors], **kw)


def _build(
    server: WeaviateTestServer | None = None,
    *,
    kb_id: str = "wv",
    backends: dict | None = None,
    url: str | None = None,
    grpc_port: int | None = None,
    workspace=None,
    **options,
) -> kairox_weaviate.WeaviateSource:
    """A source built through the registered kind (config model, then factory)."""
    kind = check_kind_registration(kairox_weaviate, "weaviate")
    # Functional tests must not race the default 800 ms deadline on a loaded CI machine;
    # the deadline tests pass their own timeout_ms.
    options.setdefault("timeout_ms", 10_000)
    options.setdefault("collection", CORPUS_COLLECTION)
    if options.get("mode", "hybrid") != "bm25":
        options.setdefault("embedding_backend", "hashing")
    return testing.build_source(
        kairox_weaviate,
        kind.name,
        kb_id,
        embedders={"hashing": HashingEmbedder(), **(backends or {})},
        workspace=workspace,
        url=url or server.url,
        grpc_port=grpc_port or server.grpc_port,
        **options,
    )


@pytest.fixture(scope="session")
def corpus_server() -> Iterator[WeaviateTestServer]:
    """One loopback Weaviate holding CORPUS (hashing-384 vectors) in ``Corpus``; read only."""
    with WeaviateTestServer(collections=[CORPUS_COLLECTION]) as server:
        seed_corpus(server)
        yield server


@pytest.fixture
def server() -> Iterator[WeaviateTestServer]:
    """A fresh loopback Weaviate holding CORPUS in ``Corpus``, for tests that change it."""
    with WeaviateTestServer(collections=[CORPUS_COLLECTION]) as fresh:
        seed_corpus(fresh)
        yield fresh


@pytest.fixture(scope="session")
def build_source() -> Callable[..., kairox_weaviate.WeaviateSource]:
    """``build_source(server, **config)``: a source built as Kairox builds it (the caller
    closes it)."""
    return _build


@pytest.fixture
def make_source(build_source) -> Iterator[Callable[..., kairox_weaviate.WeaviateSource]]:
    """``make_source(server, **config)``: like ``build_source``, closed after the test."""
    built: list[kairox_weaviate.WeaviateSource] = []

    def make(*args, **kwargs) -> kairox_weaviate.WeaviateSource:
        source = build_source(*args, **kwargs)
        built.append(source)
        return source

    yield make
    for source in built:
        source.close()


@pytest.fixture(scope="session")
def closed_port() -> Callable[[], int]:
    """A function returning a loopback port nothing listens on."""

    def port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    return port


@pytest.fixture(scope="session")
def helpers():
    """Test helpers as a namespace (see the module)."""

    class _Helpers:
        CountingEmbedder = CountingEmbedder
        TableEmbedder = TableEmbedder
        corpus_objects = staticmethod(corpus_objects)
        seed_corpus = staticmethod(seed_corpus)
        CORPUS_COLLECTION = CORPUS_COLLECTION

    return _Helpers
