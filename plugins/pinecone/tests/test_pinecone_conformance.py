"""Kairox's conformance suite against the real SDK and a loopback index, the registration
check, lazy loading of the SDK, and discovery through ``kairox plugins``."""

from __future__ import annotations

import subprocess
import sys
import types

import kairox_pinecone
import pytest
from kairox_pinecone.testing import closed_url

from kairox.retrieval import Query, ScoreKind, Source, VectorSyncTarget
from kairox.testing import (
    DATE_RANGE_CASES,
    FILTER_CORPUS,
    FilterConformance,
    SourceConformance,
    check_kind_registration,
    check_listed_by_kairox_plugins,
    run,
)


class TestPineconeFilters(FilterConformance):
    # Pinecone's ranges compare numbers only: date ranges are refused, loudly.
    filter_refuses = DATE_RANGE_CASES
    filter_query = "This passage is about"  # words every passage shares: no zero cosine

    @pytest.fixture
    def filter_source(self, server, hashing, make_source):
        passages = [f"{doc.title}. {doc.text}" for doc in FILTER_CORPUS]
        vectors = hashing.embed(passages)
        server.seed(
            [
                {"id": d.id, "values": v.tolist(), "metadata": {"text": p, **d.metadata}}
                for d, p, v in zip(FILTER_CORPUS, passages, vectors, strict=True)
            ]
        )
        return make_source(server.url)


class TestPineconeConformance(SourceConformance):
    @pytest.fixture
    def conformance_source(self, corpus_server, make_source):
        return make_source(corpus_server.url)

    @pytest.fixture
    def broken_source(self, make_source):
        return make_source(closed_url())


def test_registers_the_pinecone_kind():
    kind = check_kind_registration(kairox_pinecone, "pinecone")
    assert kind.config_model is kairox_pinecone.PineconeConfig
    assert kind.factory is kairox_pinecone.build_source


def test_the_source_is_dense_and_a_sync_target(corpus_server, make_source, embedder):
    source = make_source(corpus_server.url)
    assert isinstance(source, Source)
    assert isinstance(source, VectorSyncTarget)
    assert source.score_kind is ScoreKind.COSINE
    assert source.embedder is embedder  # the shared backend from ctx.embedding_backend
    assert source.embedding_backend == "hashing"  # the configured name, not embedder.name
    hits = run(source.retrieve(Query("saturn rings water", k=5)))
    assert hits[0].id == "astro-1"
    assert all(0 < hit.score <= 1.0 + 1e-6 for hit in hits)


def test_broken_source_names_the_host(make_source):
    host = closed_url()
    with pytest.raises(kairox_pinecone.PineconeUnreachableError, match="cannot reach") as caught:
        run(make_source(host).retrieve(Query("saturn rings")))
    assert host in str(caught.value)


# -- lazy loading -----------------------------------------------------------------------


def test_importing_the_plugin_does_not_import_pinecone():
    code = "import sys, kairox_pinecone, kairox_pinecone.testing; print('pinecone' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_a_missing_sdk_gives_an_install_hint(monkeypatch, corpus_server, make_source):
    monkeypatch.setitem(sys.modules, "pinecone", None)  # `import pinecone` now fails
    source = make_source(corpus_server.url)
    assert "pip install kairox-pinecone" in source.unavailable_reason()
    with pytest.raises(ImportError, match="pip install kairox-pinecone"):
        run(source.retrieve(Query("saturn rings")))
    with pytest.raises(ImportError, match="pip install kairox-pinecone"):
        kairox_pinecone.load_pinecone()
    assert corpus_server.count() == 0


def test_an_sdk_too_old_gives_an_upgrade_hint(monkeypatch):
    old = types.ModuleType("pinecone")  # what pinecone 8.x (or pinecone-client) looks like
    old.__version__ = "8.1.2"
    monkeypatch.setitem(sys.modules, "pinecone", old)
    with pytest.raises(ImportError, match=r"needs pinecone>=9.0, but pinecone 8\.1\.2"):
        kairox_pinecone.load_pinecone()


def test_kairox_plugins_lists_pinecone_as_ok():
    check_listed_by_kairox_plugins(
        "pinecone", "kairox-pinecone", "kairox_register_knowledge_base_kinds"
    )
