"""Kairox's conformance suite for each mode, the registration check, discovery through
``kairox plugins``, lazy imports and the install hint."""

from __future__ import annotations

import subprocess
import sys

import kairox_weaviate
import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Query
from kairox.testing import (
    DATE_RANGE_CASES,
    FILTER_CORPUS,
    UNICODE_FIELD_CASES,
    FilterConformance,
    SourceConformance,
    check_kind_registration,
    check_listed_by_kairox_plugins,
    run,
)


@pytest.fixture(scope="module")
def filter_server():
    """FILTER_CORPUS in ``Corpus``, without the unicode field name Weaviate cannot hold."""
    from kairox_weaviate.testing import WeaviateTestServer

    objects = [
        {"text": d.text, "title": d.title, "doc_id": d.id}
        | {k: v for k, v in d.metadata.items() if k.isascii()}
        for d in FILTER_CORPUS
    ]
    vectors = HashingEmbedder().embed([f"{d.title}. {d.text}" for d in FILTER_CORPUS])
    with WeaviateTestServer(collections=["Corpus"]) as server:
        server.seed("Corpus", objects, [list(map(float, v)) for v in vectors])
        yield server


class _WeaviateFilters(FilterConformance):
    # Date ranges are not wired up; unicode field names are no Weaviate property names;
    # a property the collection lacks is an error in Weaviate, not "missing".
    filter_refuses = DATE_RANGE_CASES | UNICODE_FIELD_CASES | {"exists-absent-field"}
    filter_query = "This passage is about"
    mode = "bm25"

    @pytest.fixture
    def filter_source(self, filter_server, make_source):
        return make_source(filter_server, mode=self.mode)


class TestBm25Filters(_WeaviateFilters):
    mode = "bm25"


class TestNearVectorFilters(_WeaviateFilters):
    mode = "near_vector"


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


def test_registers_the_weaviate_kind():
    kind = check_kind_registration(kairox_weaviate, "weaviate")
    assert kind.config_model is kairox_weaviate.WeaviateConfig
    assert kind.factory is kairox_weaviate.build_source


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


def test_importing_the_plugin_imports_neither_weaviate_nor_grpc():
    code = (
        "import sys, kairox_weaviate\n"
        "from kairox.plugins import KairoxPluginManager\n"
        "KairoxPluginManager()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'weaviate', 'grpc'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_missing_client_gives_an_install_hint(monkeypatch, corpus_server, make_source):
    built = make_source(corpus_server, mode="bm25")  # while the client is importable
    monkeypatch.setitem(sys.modules, "weaviate", None)
    with pytest.raises(ImportError, match="pip install kairox-weaviate"):
        make_source(corpus_server, mode="bm25")
    with pytest.raises(ImportError, match="pip install kairox-weaviate"):
        run(built.retrieve(Query("saturn")))


def test_kairox_plugins_lists_weaviate_as_ok():
    check_listed_by_kairox_plugins(
        "weaviate", "kairox-weaviate", "kairox_register_knowledge_base_kinds"
    )
