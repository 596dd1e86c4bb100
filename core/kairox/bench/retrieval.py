"""``kairox bench retrieval``: quality and speed of retrieval systems on one BEIR dataset.

Every system is a real Kairox source driven through its public interface:

* a knowledge-base kind that accepts documents (``sqlite-fts``, ``tantivy``, ...) is
  built from the plugin registry, filled with the corpus and queried;
* ``dense`` (all-MiniLM-L6-v2, from ``kairox-sentence-transformers``), ``hashing``
  and ``dense:<backend>`` embed the corpus once (cached on disk, keyed by the corpus
  hash and the model) and search it with one matrix product per query;
* ``hybrid`` fuses ``sqlite-fts`` and ``dense`` with reciprocal rank fusion through
  ``CompositeWorkspaceRetriever``, exactly as ``kairox search`` does.

Metrics come from ir-measures: nDCG@10, Recall@100 and MRR@10 (``RR@10``), plus index
seconds and per-query latency percentiles.
"""

from __future__ import annotations

import asyncio
import json
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench.beir import BeirDataset
from kairox.errors import KairoxError
from kairox.registry import BuildContext, Registry
from kairox.retrieval import Document, IngestableSource, Query, WorkspaceRetriever
from kairox.retrieval.vectors import VectorSource

DEPTH = 100  # hits per query: enough for Recall@100
EMBED_BATCH = 128
DENSE_ALIASES = {"dense": "minilm", "hashing": "hashing"}
# Where each local kind keeps its files, relative to a scratch folder.
LOCAL_KIND_OPTIONS = {"sqlite-fts": {"path": "sqlite-fts.db"}, "tantivy": {"index_dir": "tantivy"}}
INSTALL_HINTS = {
    "tantivy": "kairox install kairox-tantivy",
    "minilm": "kairox install kairox-sentence-transformers",
}

Progress = Callable[[str, int, int], None]


class BenchError(KairoxError, ValueError):
    """A benchmark cannot run as asked (unknown system, missing plugin...)."""


@dataclass
class SystemRun:
    """What one system produced: its hits per query, and its timings."""

    system: str
    index_s: float
    index_cached: bool
    latencies_ms: list[float] = field(default_factory=list)
    run: dict[str, list[str]] = field(default_factory=dict)  # query id -> ranked doc ids


def _need_ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError:
        raise BenchError(
            "kairox bench needs ir-measures: pip install 'kairox[bench]' (or pip install "
            "ir-measures)"
        ) from None
    return ir_measures


def score(dataset: BeirDataset, run: dict[str, list[str]]) -> dict[str, float]:
    """nDCG@10, Recall@100 and MRR@10 of a ranked run, averaged over judged queries."""
    ir_measures = _need_ir_measures()
    from ir_measures import RR, R, nDCG

    qrels = [
        ir_measures.Qrel(qid, doc_id, relevance)
        for qid, judged in dataset.qrels.items()
        for doc_id, relevance in judged.items()
    ]
    # Scores from ranks, so ir-measures keeps exactly the order the system returned.
    scored = [
        ir_measures.ScoredDoc(qid, doc_id, float(DEPTH - rank))
        for qid, ranked in run.items()
        for rank, doc_id in enumerate(ranked)
    ]
    measures = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}
    values = ir_measures.calc_aggregate(list(measures.values()), qrels, scored)
    return {name: float(values.get(measure, 0.0)) for name, measure in measures.items()}


class Bench:
    """Builds each system once per run and shares parts (hybrid reuses its halves)."""

    def __init__(
        self,
        dataset: BeirDataset,
        registry: Registry,
        *,
        cache_dir: Path,
        scratch: Path,
        progress: Progress | None = None,
    ) -> None:
        self.dataset = dataset
        self.registry = registry
        self.cache_dir = cache_dir
        self.scratch = scratch
        self.progress = progress
        self._built: dict[str, tuple[WorkspaceRetriever, float, bool]] = {}

    # -- systems ----------------------------------------------------------------------

    def available(self) -> list[str]:
        local = [k for k in self.registry.knowledge_base_kinds if k in LOCAL_KIND_OPTIONS]
        return [*local, "dense", "hashing", "hybrid", "dense:<backend>"]

    def system(self, name: str) -> tuple[WorkspaceRetriever, float, bool]:
        """(source, index seconds, whether the index came from the cache)."""
        if name not in self._built:
            self._built[name] = self._build(name)
        return self._built[name]

    def _build(self, name: str) -> tuple[WorkspaceRetriever, float, bool]:
        if name == "hybrid":
            return self._hybrid("sqlite-fts", "dense")
        if name in DENSE_ALIASES or name.startswith("dense:"):
            return self._dense(DENSE_ALIASES.get(name) or name.split(":", 1)[1], name)
        if name in LOCAL_KIND_OPTIONS or name in self.registry.knowledge_base_kinds:
            return self._lexical(name)
        raise BenchError(
            f"unknown system {name!r}; available: {', '.join(self.available())}"
            + (f" (install it: {INSTALL_HINTS[name]})" if name in INSTALL_HINTS else "")
        )

    def _context(self, folder: Path) -> BuildContext:
        return BuildContext(
            workspace_root=folder,
            state_dir=folder,
            base_dir=folder,
            embedding_backend=self._backend,
        )

    def _backend(self, name: str) -> Any:
        spec = self.registry.embedding_backends.get(name)
        if spec is None:
            hint = f" (install it: {INSTALL_HINTS[name]})" if name in INSTALL_HINTS else ""
            known = ", ".join(sorted(self.registry.embedding_backends))
            raise BenchError(f"no embedding backend {name!r}{hint}; installed: {known}")
        return spec.factory()

    def _lexical(self, kind_name: str) -> tuple[WorkspaceRetriever, float, bool]:
        kind = self.registry.knowledge_base_kinds.get(kind_name)
        if kind is None:
            hint = (
                f" (install it: {INSTALL_HINTS[kind_name]})" if kind_name in INSTALL_HINTS else ""
            )
            raise BenchError(f"knowledge-base kind {kind_name!r} is not installed{hint}")
        options = LOCAL_KIND_OPTIONS.get(kind_name)
        if options is None:
            raise BenchError(f"kind {kind_name!r} has no local benchmark set-up")
        folder = self.scratch / kind_name
        folder.mkdir(parents=True, exist_ok=True)
        config = kind.config_model(kind=kind_name, **options)
        source = kind.factory(kind_name, config, self._context(folder))
        if not isinstance(source, IngestableSource):
            raise BenchError(f"kind {kind_name!r} cannot be filled with documents")
        documents = [
            Document(doc_id, text, title=title)
            for doc_id, (title, text) in self.dataset.corpus.items()
        ]
        started = time.perf_counter()
        for start in range(0, len(documents), 1000):
            source.upsert(documents[start : start + 1000])
            self._report(f"indexing {kind_name}", start + 1000, len(documents))
        return source, time.perf_counter() - started, False

    def _dense(self, backend_name: str, system: str) -> tuple[WorkspaceRetriever, float, bool]:
        backend = self._backend(backend_name)
        ids = list(self.dataset.corpus)
        texts = [f"{title}\n{text}".strip() for title, text in self.dataset.corpus.values()]
        matrix, seconds, cached = self._embeddings(backend, ids, texts, system)
        source = VectorSource(system, backend, ids, texts, matrix)
        return source, seconds, cached

    def _embeddings(
        self, backend: Any, ids: list[str], texts: list[str], system: str
    ) -> tuple[np.ndarray, float, bool]:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", backend.name)
        cache = self.cache_dir / f"{self.dataset.corpus_sha256[:20]}-{safe}-{backend.dim}.npz"
        if cache.is_file():
            stored = np.load(cache, allow_pickle=False)
            if list(stored["ids"]) == ids:
                return stored["matrix"], float(stored["seconds"]), True
        started = time.perf_counter()
        parts = []
        for start in range(0, len(texts), EMBED_BATCH):
            parts.append(np.asarray(backend.embed(texts[start : start + EMBED_BATCH]), np.float32))
            self._report(f"embedding corpus ({system})", start + EMBED_BATCH, len(texts))
        matrix = np.vstack(parts) if parts else np.zeros((0, backend.dim), np.float32)
        seconds = time.perf_counter() - started
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(".partial.npz")
        np.savez(partial, ids=np.asarray(ids), matrix=matrix, seconds=np.float64(seconds))
        partial.replace(cache)  # never leave a half-written cache behind
        return matrix, seconds, False

    def _hybrid(self, lexical: str, dense: str) -> tuple[WorkspaceRetriever, float, bool]:
        from kairox.retrieval.composite import CompositeWorkspaceRetriever

        parts = [self.system(lexical), self.system(dense)]
        composite = CompositeWorkspaceRetriever(
            [source for source, _, _ in parts],
            default_timeout_ms=600_000,
            fusion="rrf",
            candidates=DEPTH,
        )
        composite.name = "hybrid"  # type: ignore[attr-defined]
        return composite, sum(s for _, s, _ in parts), all(c for _, _, c in parts)

    def _report(self, what: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(what, min(done, total), total)

    # -- running --------------------------------------------------------------------

    def run(self, name: str) -> SystemRun:
        source, index_s, cached = self.system(name)
        result = SystemRun(name, index_s, cached)
        queries = list(self.dataset.queries.items())

        async def ask_all() -> None:
            for done, (qid, text) in enumerate(queries, start=1):
                started = time.perf_counter()
                answer = await source.retrieve(Query(text, k=DEPTH))
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                hits = getattr(answer, "hits", answer)  # a composite returns a result
                result.run[qid] = [hit.id for hit in hits]
                self._report(f"querying {name}", done, len(queries))

        asyncio.run(ask_all())
        return result


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else 0.0


def benchmark(
    dataset: BeirDataset,
    systems: Sequence[str],
    registry: Registry,
    *,
    cache_dir: Path,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every system on ``dataset``; returns the report written by ``--out``."""
    _need_ir_measures()
    results = []
    with tempfile.TemporaryDirectory(prefix="kairox-bench-") as scratch:
        bench = Bench(
            dataset, registry, cache_dir=cache_dir, scratch=Path(scratch), progress=progress
        )
        for name in systems:  # build everything first so an unknown name fails fast
            bench.system(name)
        for name in systems:
            ran = bench.run(name)
            results.append(
                {
                    "system": name,
                    **score(dataset, ran.run),
                    "index_s": round(ran.index_s, 3),
                    "index_cached": ran.index_cached,
                    "p50_ms": round(percentile(ran.latencies_ms, 50), 3),
                    "p95_ms": round(percentile(ran.latencies_ms, 95), 3),
                    "qps": round(1000 / statistics.mean(ran.latencies_ms), 1)
                    if ran.latencies_ms
                    else 0.0,
                    "queries": len(ran.run),
                }
            )
    return {
        "dataset": str(dataset.path),
        "split": dataset.split,
        "documents": len(dataset.corpus),
        "queries": len(dataset.queries),
        "depth": DEPTH,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "systems": results,
    }


def write_report(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
