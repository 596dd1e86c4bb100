"""Shared fixtures: a loopback Pinecone index, the CORPUS in it, and sources built the way
Kairox builds them (config model, then factory).

Helpers are fixtures (not imports from this file) so the tests run under any pytest
import mode, including the repository root's ``--import-mode=importlib``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import kairox_pinecone
import pytest
from kairox_pinecone.testing import PineconeTestServer

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.testing import CORPUS, CountingEmbedder, build_source, check_kind_registration

API_KEY = "kairox-test-key"
KEY_ENV = "KAIROX_TEST_PINECONE_KEY"


@pytest.fixture(scope="session")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def embedder(hashing) -> CountingEmbedder:
    """The ``hashing`` backend as sources in one test share it (``ctx.embedding_backend``)."""
    return CountingEmbedder(hashing)


@pytest.fixture(scope="session")
def corpus_records(hashing) -> list[dict[str, Any]]:
    """Every CORPUS document as a Pinecone vector: hashing embedding of title + text,
    the passage in metadata ``text``, plus ``uri``, ``topic`` and ``year``."""
    passages = [f"{doc.title}. {doc.text}" for doc in CORPUS]
    vectors = hashing.embed(passages)
    return [
        {
            "id": doc.id,
            "values": vector.tolist(),
            "metadata": {"text": passage, "uri": doc.uri, **doc.metadata},
        }
        for doc, passage, vector in zip(CORPUS, passages, vectors, strict=True)
    ]


@pytest.fixture
def api_key(monkeypatch) -> str:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    return API_KEY


@pytest.fixture
def server(api_key) -> Iterator[PineconeTestServer]:
    """An empty 384-dim cosine index on a loopback port."""
    with PineconeTestServer(384, api_key=api_key) as running:
        yield running


@pytest.fixture
def corpus_server(server, corpus_records) -> PineconeTestServer:
    """``server`` holding CORPUS in the default namespace."""
    server.seed(corpus_records)
    return server


MakeSource = Callable[..., kairox_pinecone.PineconeSource]


@pytest.fixture
def make_source(embedder, api_key) -> Iterator[MakeSource]:
    """``make_source(host, kb_id="papers", **options)``: a source built through the
    registered kind, with ``api_key_env`` set to a variable holding the server's key.
    Sources are closed after the test."""
    kind = check_kind_registration(kairox_pinecone, "pinecone")
    built: list[kairox_pinecone.PineconeSource] = []
    backends = {"hashing": embedder}

    def make(host: str, kb_id: str = "papers", **options: Any) -> kairox_pinecone.PineconeSource:
        # Functional tests must not race the default 800 ms deadline on a loaded CI machine;
        # the deadline tests pass their own timeout_ms.
        options.setdefault("timeout_ms", 10_000)
        options.setdefault("api_key_env", KEY_ENV)
        options.setdefault("embedding_backend", "hashing")
        source = build_source(
            kairox_pinecone, kind.name, kb_id, embedders=backends, host=host, **options
        )
        built.append(source)
        return source

    yield make
    for source in built:
        source.close()
