"""Kairox's filter conformance suite, through the real SDK, against the loopback index
(which evaluates Pinecone's filter language on the stored metadata)."""

from __future__ import annotations

import pytest

from kairox.testing import DATE_RANGE_CASES, FILTER_CORPUS, FilterConformance


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
