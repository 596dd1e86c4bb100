"""Kairox's filter conformance suite in the bm25 and near_vector modes."""

from __future__ import annotations

import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.testing import DATE_RANGE_CASES, FILTER_CORPUS, UNICODE_FIELD_CASES, FilterConformance


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
