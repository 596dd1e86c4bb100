"""Kairox's source conformance suite for each mode, the plugin conformance suite (the
registration check, lazy imports, discovery through ``kairox plugins``), and the install
hint."""

from __future__ import annotations

import sys

import kairox_weaviate
import pytest

from kairox.retrieval import Query
from kairox.testing import PluginConformance, SourceConformance, run


class TestBm25Conformance(SourceConformance):
    @pytest.fixture
    def conformance_source(self, corpus_server, make_source):
        return make_source(corpus_server, mode="bm25")

    @pytest.fixture
    def broken_source(self, make_source, closed_port):
        return make_source(
            url=f"http://127.0.0.1:{closed_port()}", grpc_port=closed_port(), mode="bm25"
        )


class TestHybridConformance(SourceConformance):
    fuzz_examples, fuzz_max_size = 150, None

    @pytest.fixture
    def conformance_source(self, corpus_server, make_source):
        return make_source(corpus_server, mode="hybrid", alpha=0.5)

    @pytest.fixture
    def broken_source(self, make_source, closed_port):
        return make_source(url=f"http://127.0.0.1:{closed_port()}", grpc_port=closed_port())


class TestNearVectorConformance(SourceConformance):
    @pytest.fixture
    def conformance_source(self, corpus_server, make_source):
        return make_source(corpus_server, mode="near_vector")

    @pytest.fixture
    def broken_source(self, corpus_server, make_source, closed_port):
        # REST answers, gRPC does not: the port probe must say which port is wrong.
        return make_source(corpus_server, mode="near_vector", grpc_port=closed_port())


class TestWeaviatePlugin(PluginConformance):
    plugin, kind, distribution = kairox_weaviate, "weaviate", "kairox-weaviate"
    config_model = kairox_weaviate.WeaviateConfig
    lazy_modules = ("weaviate", "grpc")


def test_a_closed_rest_port_is_a_clear_error(make_source, closed_port):
    source = make_source(url=f"http://127.0.0.1:{closed_port()}", grpc_port=closed_port())
    with pytest.raises(kairox_weaviate.WeaviateSourceError, match="cannot reach Weaviate"):
        run(source.retrieve(Query("saturn")))


def test_a_closed_grpc_port_names_grpc_port(corpus_server, make_source, closed_port):
    port = closed_port()
    source = make_source(corpus_server, mode="bm25", grpc_port=port)
    with pytest.raises(
        kairox_weaviate.WeaviateSourceError, match=rf"gRPC port .*:{port}.*grpc_port"
    ):
        run(source.retrieve(Query("saturn")))


def test_missing_client_gives_an_install_hint(monkeypatch, corpus_server, make_source):
    built = make_source(corpus_server, mode="bm25")  # while the client is importable
    monkeypatch.setitem(sys.modules, "weaviate", None)
    with pytest.raises(ImportError, match="pip install kairox-weaviate"):
        make_source(corpus_server, mode="bm25")
    with pytest.raises(ImportError, match="pip install kairox-weaviate"):
        run(built.retrieve(Query("saturn")))
