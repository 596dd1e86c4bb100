"""Kairox's source and plugin conformance suites against the real SDK and a loopback index:
the registration check, lazy loading of the SDK, and discovery through ``kairox plugins``."""

from __future__ import annotations

import sys
import types

import kairox_pinecone
import pytest
from kairox_pinecone.testing import closed_url

from kairox.retrieval import Query, ScoreKind, Source, VectorSyncTarget
from kairox.testing import PluginConformance, SourceConformance, run


class TestPineconeConformance(SourceConformance):
    @pytest.fixture
    def conformance_source(self, corpus_server, make_source):
        return make_source(corpus_server.url)

    @pytest.fixture
    def broken_source(self, make_source):
        return make_source(closed_url())


class TestPineconePlugin(PluginConformance):
    plugin, kind, distribution = kairox_pinecone, "pinecone", "kairox-pinecone"
    config_model = kairox_pinecone.PineconeConfig
    lazy_modules = ("pinecone",)
    also_imported = ("kairox_pinecone.testing",)


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
