"""The composite retriever's shared query embedding, and how many sources it runs at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from kairox.retrieval import (
    FAN_OUT,
    CompositeWorkspaceRetriever,
    Hit,
    Query,
    RetrievalResult,
    SourceStatus,
)
from kairox.testing import run
from tests.retrieval.composite_doubles import (
    BrokenEmbedder,
    CountingEmbedder,
    StaticSource,
    report,
    retrieve,
)

# --- shared query embedding ----------------------------------------------------------------


def test_two_sources_on_one_backend_share_one_embedding() -> None:
    embedder = CountingEmbedder("hash-4", fill=0.5)
    same_name_other_object = CountingEmbedder("hash-4", fill=0.5)
    dense = [
        StaticSource("d1", ["x"], embedder=embedder),
        StaticSource("d2", ["y"], embedder=embedder),
        StaticSource("d3", ["z"], embedder=same_name_other_object),
    ]
    lexical = StaticSource("fts", ["w"])
    result = run(CompositeWorkspaceRetriever([*dense, lexical]).retrieve(Query("find me")))

    assert embedder.calls + same_name_other_object.calls == [["find me"]]
    for source in dense:
        vector = source.received[0].embeddings["hash-4"]
        np.testing.assert_array_equal(vector, np.full(4, 0.5, dtype=np.float32))
    assert dict(lexical.received[0].embeddings) == {}
    assert all(r.status is SourceStatus.OK for r in result.reports)


def test_each_backend_is_called_once() -> None:
    small, large = CountingEmbedder("small", fill=1.0), CountingEmbedder("large", fill=2.0, dim=8)
    sources = [
        StaticSource("s1", ["a"], embedder=small),
        StaticSource("l1", ["b"], embedder=large),
        StaticSource("s2", ["c"], embedder=small),
        StaticSource("l2", ["d"], embedder=large),
    ]
    run(CompositeWorkspaceRetriever(sources).retrieve(Query("q")))
    assert len(small.calls) == 1 and len(large.calls) == 1
    assert sources[0].received[0].embeddings["small"].shape == (4,)
    assert sources[1].received[0].embeddings["large"].shape == (8,)
    # Each source gets its own backend's vector, never a different model's.
    assert "large" not in sources[0].received[0].embeddings
    assert "small" not in sources[1].received[0].embeddings


def test_a_vector_the_caller_supplied_is_not_recomputed() -> None:
    embedder = CountingEmbedder("hash-4")
    source = StaticSource("d", ["x"], embedder=embedder)
    given = np.zeros(4, dtype=np.float32)
    run(CompositeWorkspaceRetriever([source]).retrieve(Query("q", embeddings={"hash-4": given})))
    assert embedder.calls == []
    assert source.received[0].embeddings["hash-4"] is given


def test_a_failing_embedding_is_an_error_for_the_sources_that_need_it() -> None:
    broken = BrokenEmbedder("minilm")
    sources = [
        StaticSource("dense1", ["x"], embedder=broken),
        StaticSource("dense2", ["y"], embedder=broken),
        StaticSource("fts", ["z"]),
    ]
    result = retrieve(CompositeWorkspaceRetriever(sources))
    assert len(broken.calls) == 1
    for name in ("dense1", "dense2"):
        failed = report(result, name)
        assert failed.status is SourceStatus.ERROR
        assert "'minilm'" in failed.error and "OSError: model file missing" in failed.error
    assert sources[0].received == [] and sources[1].received == []
    assert [h.id for h in result.hits] == ["z"]


def test_a_slow_embedding_counts_against_the_source_deadline() -> None:
    class SlowEmbedder(CountingEmbedder):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.release = threading.Event()

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            self.release.wait(3)
            return super().embed(texts)

    slow = SlowEmbedder("big-model")
    dense = StaticSource("dense", ["x"], embedder=slow)

    async def scenario() -> RetrievalResult:
        try:
            return await CompositeWorkspaceRetriever(
                [dense, StaticSource("fts", ["y"])], timeouts_ms={"dense": 50}
            ).retrieve(Query("q"))
        finally:
            slow.release.set()

    result = run(scenario())
    assert report(result, "dense").status is SourceStatus.TIMEOUT
    assert dense.received == []
    assert [h.id for h in result.hits] == ["y"]


# --- how many sources run at once ---------------------------------------------------------


class FanOutProbe(StaticSource):
    """Notes the fan-out width it sees from its worker thread, as a CPU-heavy source would."""

    def __init__(self, name: str) -> None:
        super().__init__(name, [f"{name}-hit"])
        self.widths: list[int] = []

    async def retrieve(self, query: Query) -> list[Hit]:
        self.widths.append(await asyncio.to_thread(FAN_OUT.get))
        return self.hits


class WidthEmbedder(CountingEmbedder):
    """Notes the fan-out width each embedding runs under."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.widths: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.widths.append(FAN_OUT.get())
        return super().embed(texts)


def test_sources_and_the_query_embedding_see_how_many_run_at_once() -> None:
    embedder = WidthEmbedder("model")
    several = [FanOutProbe("a"), FanOutProbe("b")]
    dense = StaticSource("dense", ["d"], embedder=embedder)
    CompositeWorkspaceRetriever([*several, dense]).retrieve_sync(Query("q"))
    assert [probe.widths for probe in several] == [[3], [3]]
    assert embedder.widths == [3]
    alone = FanOutProbe("c")
    run(CompositeWorkspaceRetriever([alone]).retrieve(Query("q")))
    assert alone.widths == [1]
    assert FAN_OUT.get() == 1  # the caller's own context is left as it was


def test_a_secret_in_a_source_error_is_masked(monkeypatch) -> None:
    from kairox.support.secrets import register_env

    key = "pc-live-9f8e7d6c5b4a"
    monkeypatch.setenv("COMPOSITE_TEST_KEY", key)
    register_env("COMPOSITE_TEST_KEY")

    class EchoingSource(StaticSource):
        async def retrieve(self, query: Query) -> list[Hit]:
            raise RuntimeError(f"HTTP 401: {{'Api-Key': '{key}'}} was refused")

    result = retrieve(CompositeWorkspaceRetriever([EchoingSource("remote", ["x"])]))
    assert (
        report(result, "remote").error == "RuntimeError: HTTP 401: {'Api-Key': '***'} was refused"
    )
