"""The conformance suite for source and embedding plugins (requires pytest).

A plugin's own tests subclass the suites and provide fixtures::

    import kairox_mine
    from kairox.testing import CORPUS, SourceConformance, build_source

    class TestMySource(SourceConformance):
        @pytest.fixture
        def conformance_source(self, tmp_path):
            fill_my_index_with(CORPUS, tmp_path / "index")   # every CORPUS document
            return build_source(kairox_mine, "mine", base_dir=tmp_path, index="index")

        @pytest.fixture
        def broken_source(self, tmp_path):
            return build_source(kairox_mine, "mine", base_dir=tmp_path, index="missing")

:func:`build_source` builds a source through the plugin's registered kind, as Kairox
does from a config table; :class:`CountingEmbedder` records what a source asks to embed
(:class:`ModelHoldingEmbedder` also has a model to load and release);
:class:`PluginConformance` checks a knowledge-base plugin's registration, lazy imports and
``kairox plugins`` listing (:mod:`kairox.testing.fuzz` has random-filter strategies).
The loopback servers' shared base is :mod:`kairox.testing.loopback`.

Every in-tree plugin and the plugin template run these suites against themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Coroutine
from typing import Any, ClassVar, TypeVar

import numpy as np
import pytest

from kairox.retrieval import Hit, Query, QueryError, ScoreKind, Source
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.testing.build import (
    CountingEmbedder,
    ModelHoldingEmbedder,
    build_source,
    check_kind_registration,
    registered_plugin,
)
from kairox.testing.corpus import CORPUS, EXPECTED, HOSTILE_QUERIES, CorpusDocument
from kairox.testing.filters import (
    DATE_RANGE_CASES,
    FILTER_CASES,
    FILTER_CORPUS,
    UNICODE_FIELD_CASES,
    FilterConformance,
    expected_ids,
)
from kairox.testing.plugin import PluginConformance, check_listed_by_kairox_plugins
from kairox.testing.processes import kairox_process, python_process

__all__ = [
    "CORPUS",
    "DATE_RANGE_CASES",
    "EXPECTED",
    "FILTER_CASES",
    "FILTER_CORPUS",
    "HOSTILE_QUERIES",
    "UNICODE_FIELD_CASES",
    "CorpusDocument",
    "CountingEmbedder",
    "EmbeddingConformance",
    "FilterConformance",
    "ModelHoldingEmbedder",
    "PluginConformance",
    "SourceConformance",
    "build_source",
    "check_kind_registration",
    "check_listed_by_kairox_plugins",
    "expected_ids",
    "kairox_process",
    "python_process",
    "registered_plugin",
    "run",
]

T = TypeVar("T")

# Errors that mean "the source has a bug", not "the source reported a problem clearly".
_BUG_ERRORS = (AttributeError, IndexError, KeyError, NameError, TypeError, UnboundLocalError)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion on a fresh event loop."""
    return asyncio.run(coroutine)


def _to_define(name: str, returning: str) -> Any:
    """A fixture a conformance suite's user must define; until then it fails saying so."""

    def undefined(self: Any) -> Any:
        pytest.fail(f"define the `{name}` fixture, returning {returning}")

    return pytest.fixture(undefined, name=name)


def _assert_named(implementation: Any, protocol: type) -> None:
    """``implementation`` implements ``protocol`` and has a non-empty ``name``."""
    assert isinstance(implementation, protocol)
    assert isinstance(implementation.name, str) and implementation.name


def _retrieve(source: Source, text: str, k: int = 10, **filters: Any) -> list[Hit]:
    return run(source.retrieve(Query(text, k=k, filters=filters)))


class SourceConformance:
    """Checks every retriever (workspace retriever or knowledge base) must pass.

    Fixtures to provide: ``conformance_source`` (serving every document of
    :data:`CORPUS`, with its metadata) and ``broken_source`` (configured so that
    retrieval cannot work: a missing file, a stopped server).
    """

    #: Set False for a source that cannot filter on metadata.
    supports_filters: ClassVar[bool] = True
    #: The expected document must appear within this many hits.
    expected_within: ClassVar[int] = 3
    #: How many random unicode queries the fuzz test asks, and how long each is at most
    #: (``None``: any length).
    fuzz_examples: ClassVar[int] = 100
    fuzz_max_size: ClassVar[int | None] = 200

    #: :func:`kairox.testing.build_source`, for the fixtures: ``self.build_source(...)``.
    build_source = staticmethod(build_source)

    conformance_source = _to_define("conformance_source", "your retriever over CORPUS")
    broken_source = _to_define("broken_source", "a retriever that cannot work")

    def test_implements_the_protocol(self, conformance_source: Source) -> None:
        _assert_named(conformance_source, Source)
        assert isinstance(conformance_source.score_kind, ScoreKind)
        assert asyncio.iscoroutinefunction(conformance_source.retrieve)

    @pytest.mark.parametrize(("text", "expected"), EXPECTED)
    def test_finds_the_expected_document(
        self, conformance_source: Source, text: str, expected: str
    ) -> None:
        hits = _retrieve(conformance_source, text, k=self.expected_within)
        assert expected in [hit.id for hit in hits], (
            f"{expected!r} not in the top {self.expected_within} for {text!r}: "
            f"{[hit.id for hit in hits]}"
        )

    def test_hits_are_well_formed_and_best_first(self, conformance_source: Source) -> None:
        hits = _retrieve(conformance_source, "water energy light coffee", k=10)
        assert hits, "a query sharing words with several documents returned nothing"
        known = {doc.id for doc in CORPUS}
        for hit in hits:
            assert isinstance(hit, Hit)
            assert hit.id in known, f"unknown id {hit.id!r}"
            assert hit.source == conformance_source.name
            assert isinstance(hit.text, str) and hit.text.strip()
            assert isinstance(hit.score, float | int) and math.isfinite(hit.score)
        assert len({hit.id for hit in hits}) == len(hits), "duplicate ids in one result"
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True), f"not best-first: {scores}"

    @pytest.mark.parametrize("k", [1, 2, 5])
    def test_respects_k(self, conformance_source: Source, k: int) -> None:
        hits = _retrieve(conformance_source, "water energy light coffee python sql", k=k)
        assert 1 <= len(hits) <= k

    @pytest.mark.parametrize("text", HOSTILE_QUERIES)
    def test_accepts_anything_a_user_can_type(self, conformance_source: Source, text: str) -> None:
        hits = _retrieve(conformance_source, text, k=5)
        assert isinstance(hits, list)
        assert len(hits) <= 5

    def test_any_unicode_query_returns_hits_or_a_query_error(
        self, conformance_source: Source
    ) -> None:
        # Random text (hypothesis) beyond HOSTILE_QUERIES: a source answers with at most k
        # hits or says the query cannot run (QueryError), never anything else.
        try:
            from hypothesis import given, settings
            from hypothesis import strategies as st
        except ImportError:
            pytest.fail(
                "the conformance suite's fuzz test needs hypothesis: pip install hypothesis"
            )

        @settings(max_examples=self.fuzz_examples, deadline=None, database=None)
        @given(text=st.text(max_size=self.fuzz_max_size))
        def any_text(text: str) -> None:
            try:
                hits = _retrieve(conformance_source, text, k=5)
            except QueryError:
                return
            assert isinstance(hits, list) and len(hits) <= 5

        any_text()

    def test_operators_are_words_not_syntax(self, conformance_source: Source) -> None:
        plain = _retrieve(conformance_source, "saturn rings", k=3)
        hostile = _retrieve(conformance_source, '"saturn" AND (rings) -NOT:', k=3)
        assert plain and hostile
        assert hostile[0].id == plain[0].id == "astro-1"

    def test_filters_restrict_hits(self, conformance_source: Source) -> None:
        if not self.supports_filters:
            pytest.skip("this source declares supports_filters = False")
        hits = _retrieve(conformance_source, "water", k=10, topic="cooking")
        assert hits, "the filtered query should still find the espresso document"
        assert {hit.id for hit in hits} <= {
            d.id for d in CORPUS if d.metadata["topic"] == "cooking"
        }
        any_of = _retrieve(conformance_source, "water", k=10, topic=["astronomy", "biology"])
        assert any_of
        assert {h.metadata.get("topic") for h in any_of} <= {"astronomy", "biology"}

    def test_first_queries_at_once_all_answer(self, conformance_source: Source) -> None:
        # A source opens its index or client on first use, and its first queries often
        # arrive together (several knowledge bases' worth of sessions at start-up): they
        # must share what is opened, not race to open it.
        async def together() -> list[list[str]]:
            answers = await asyncio.gather(
                *(conformance_source.retrieve(Query("saturn rings", k=3)) for _ in range(4))
            )
            return [[h.id for h in hits] for hits in answers]

        answers = run(together())
        assert answers[0] and answers[0][0] == "astro-1"
        assert all(ids == answers[0] for ids in answers)

    def test_concurrent_queries_agree_with_sequential(self, conformance_source: Source) -> None:
        queries = [Query(text, k=3) for text, _ in EXPECTED]

        async def both() -> tuple[list[list[str]], list[list[str]]]:
            sequential = [[h.id for h in await conformance_source.retrieve(q)] for q in queries]
            together = await asyncio.gather(*(conformance_source.retrieve(q) for q in queries))
            return sequential, [[h.id for h in hits] for hits in together]

        sequential, concurrent = run(both())
        assert sequential == concurrent

    def test_cancellation_leaves_the_source_usable(self, conformance_source: Source) -> None:
        async def cancel_then_query() -> list[Hit]:
            task = asyncio.ensure_future(conformance_source.retrieve(Query("saturn rings", k=3)))
            await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return await conformance_source.retrieve(Query("saturn rings", k=3))

        hits = run(cancel_then_query())
        assert hits and hits[0].id == "astro-1"

    def test_a_local_answer_is_the_same_answer(self, conformance_source: Source) -> None:
        # retrieve_local (optional) is asked in the calling thread instead of retrieve.
        local = getattr(conformance_source, "retrieve_local", None)
        if local is None:
            pytest.skip("the source defines no retrieve_local")
        for text, _ in EXPECTED:
            query = Query(text, k=3)
            here = [(h.id, h.score) for h in local(query)]
            assert here == [(h.id, h.score) for h in run(conformance_source.retrieve(query))]

    def test_failure_raises_a_clear_error(self, broken_source: Source) -> None:
        with pytest.raises(Exception) as caught:
            _retrieve(broken_source, "saturn rings")
        error = caught.value
        assert not isinstance(error, _BUG_ERRORS), (
            f"a broken source should raise a clear error, not {type(error).__name__}: {error}"
        )
        assert str(error).strip(), "the error must say what is wrong"


class EmbeddingConformance:
    """Checks every embedding backend must pass. Provide an ``embedding_backend`` fixture."""

    embedding_backend = _to_define("embedding_backend", "your backend")

    def test_implements_the_protocol(self, embedding_backend: EmbeddingBackend) -> None:
        _assert_named(embedding_backend, EmbeddingBackend)
        assert isinstance(embedding_backend.dim, int) and embedding_backend.dim > 0

    def test_empty_batch(self, embedding_backend: EmbeddingBackend) -> None:
        vectors = embedding_backend.embed([])
        assert vectors.shape == (0, embedding_backend.dim)
        assert vectors.dtype == np.float32

    def test_shape_dtype_and_finiteness(self, embedding_backend: EmbeddingBackend) -> None:
        texts = [doc.text for doc in CORPUS] + ["", "🚀 café", "x" * 5000]
        vectors = embedding_backend.embed(texts)
        assert vectors.shape == (len(texts), embedding_backend.dim)
        assert vectors.dtype == np.float32
        assert np.isfinite(vectors).all()
        assert (np.abs(vectors[: len(CORPUS)]).sum(axis=1) > 0).all(), "an all-zero vector"

    def test_deterministic_and_batch_independent(self, embedding_backend: EmbeddingBackend) -> None:
        texts = [doc.text for doc in CORPUS]
        batch = embedding_backend.embed(texts)
        again = embedding_backend.embed(texts)
        alone = np.vstack([embedding_backend.embed([text]) for text in texts])
        np.testing.assert_allclose(batch, again, atol=1e-5)
        np.testing.assert_allclose(batch, alone, atol=1e-4)

    def test_a_released_model_loads_again_with_the_same_vectors(
        self, embedding_backend: EmbeddingBackend
    ) -> None:
        """Only for a backend that offers ``release()`` (see :class:`EmbeddingBackend`)."""
        release = getattr(embedding_backend, "release", None)
        if release is None:
            return
        texts = [doc.text for doc in CORPUS[:3]]
        before = embedding_backend.embed(texts)
        assert getattr(embedding_backend, "loaded", True), "embedding should load the model"
        release()
        assert getattr(embedding_backend, "loaded", False) is False, "release() kept the model"
        np.testing.assert_allclose(embedding_backend.embed(texts), before, atol=1e-5)

    @pytest.mark.parametrize(("text", "expected"), EXPECTED)
    def test_related_text_is_closer(
        self, embedding_backend: EmbeddingBackend, text: str, expected: str
    ) -> None:
        docs = list(CORPUS)
        vectors = embedding_backend.embed([f"{d.title}. {d.text}" for d in docs])
        query = embedding_backend.embed([text])[0]
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)
        similarity = (vectors @ query) / np.where(norms == 0, 1, norms)
        assert docs[int(np.argmax(similarity))].id == expected
