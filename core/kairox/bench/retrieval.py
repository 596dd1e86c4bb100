"""``kairox bench retrieval``: quality, speed and memory of retrieval systems on one BEIR dataset.

Every Kairox system is a real Kairox source driven through its public interface:

* a knowledge-base kind that accepts documents (``sqlite-fts``, ``tantivy``, ...) is
  built from the plugin registry with its default settings, filled with the corpus and
  queried;
* ``dense`` (all-MiniLM-L6-v2, from ``kairox-sentence-transformers``), ``hashing``
  and ``dense:<backend>`` embed the corpus once, each document whole and each of its
  sentences (cached on disk, keyed by the corpus hash and the model), and search it
  sentence-aware as the workspace index does (:mod:`kairox.retrieval.vectors`), with one
  matrix product per query over documents and one over sentences; ``dense-doc`` is
  ``dense`` with one vector per document only, the way it searched before;
* ``hybrid`` fuses ``sqlite-fts`` and ``dense`` through ``CompositeWorkspaceRetriever``
  with the composite's *default* fusion, exactly as ``kairox search`` does;
  ``hybrid-rrf`` (k 60, equal weights), ``hybrid-wrrf`` (weighted RRF), ``hybrid-minmax``
  and ``hybrid-dbsf`` (equal weights) are the same two halves under one fusion each, and
  ``hybrid-title1`` the default fusion over FTS5 with title weight 1, the setting before
  title weight 3 was tuned, and ``hybrid-doc`` the default fusion with ``dense-doc``
  (no sentence vectors) as its dense half (:data:`HYBRIDS`).

Peers run side by side on the same data when installed (``pip install 'kairox[bench]'``):

* ``rank_bm25``: ``rank_bm25.BM25Okapi`` (what LangChain's ``BM25Retriever`` wraps);
* ``bm25s``: ``bm25s.BM25`` (method ``lucene``, k1 1.5, b 0.75).

Both peers read the same analysis: lower case, tokens of ``\\w\\w+``, Lucene's 33 English
stop words, Snowball English stemming through PyStemmer when it is installed (the report
says ``"stemmed": true``). They are called directly, not in a worker thread as Kairox's
sources are, which can only favour them.

Metrics come from ir-measures: nDCG@10, Recall@100 and MRR@10 (``RR@10``), per query and
averaged over every judged query (a query with no hits counts as 0). Speed: index
seconds, per-query latency p50/p95 and queries per second after one untimed warm-up
query (which loads a model, if any). Memory: each system runs alone in a forked process;
``peak_rss_mb`` is how far that process's resident set (``VmHWM``) rose above its size at
the fork while building the index (or loading cached embeddings and the model) and
answering every query. Libraries imported before the fork (numpy, the peers, torch) are
not counted; indexes, vectors, model weights and query-time buffers are, native ones
(SQLite, Tantivy, torch) included.

This module holds the systems and the runner; the peers are :mod:`kairox.bench.peers`,
the metrics and significance tests :mod:`kairox.bench.metrics`, the forked runs
:mod:`kairox.bench.isolation` and the report's helpers :mod:`kairox.bench.report`.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench import BENCH_EXTRA, BenchError
from kairox.bench.beir import BeirDataset
from kairox.bench.isolation import can_isolate, run_isolated
from kairox.bench.judgments import IdMatcher, check_returned, judged_ids
from kairox.bench.metrics import DEPTH, METRICS, _need_ir_measures, per_query
from kairox.bench.peers import PEER_CLASSES, PEERS, _PeerSource
from kairox.bench.profile import (
    PREFIXES,
    BenchUsageError,
    Systems,
    check_coverage,
    did_you_mean,
    fill,
    is_external,
    record_contributions,
    record_failures,
)
from kairox.bench.report import machine, percentile, write_runs
from kairox.paths import private_file, private_folder
from kairox.registry import BuildContext, Registry
from kairox.retrieval import Query, Source
from kairox.retrieval.vectors import SentenceVectors, VectorSource
from kairox.workspace.chunking import split_sentences

EMBED_BATCH = 128
DENSE_ALIASES = {"dense": "minilm", "hashing": "hashing", "dense-doc": "minilm"}
#: Dense systems that search one vector per document, without sentence vectors.
WHOLE_DOCUMENT_ONLY = frozenset({"dense-doc"})
# Where each local kind keeps its files, relative to a scratch folder.
LOCAL_KIND_OPTIONS = {"sqlite-fts": {"path": "sqlite-fts.db"}, "tantivy": {"index_dir": "tantivy"}}
INSTALL_HINTS = {
    "tantivy": "kairox install kairox-tantivy",
    "minilm": "kairox install kairox-sentence-transformers",
    "rank_bm25": f"{BENCH_EXTRA} (or pip install rank-bm25)",
    "bm25s": f"{BENCH_EXTRA} (or pip install bm25s PyStemmer)",
}

#: The hybrid systems: ``sqlite-fts`` + ``dense`` fused by the composite with these
#: settings. ``hybrid`` passes nothing, so it is whatever ``CompositeWorkspaceRetriever``
#: (and so ``kairox search``) does by default. ``lexical`` holds extra ``sqlite-fts``
#: settings. The ``hybrid-wrrf`` weights and constant and sqlite-fts's default title
#: weight (3; ``hybrid-title1`` shows the old 1) were tuned on SciFact's *train* split
#: (``benchmarks/tune_hybrid.py``).
HYBRIDS: dict[str, dict[str, Any]] = {
    "hybrid": {},
    "hybrid-rrf": {"fusion": "rrf"},
    "hybrid-wrrf": {"fusion": "rrf", "rrf_k": 5, "weights": {"dense": 0.9}},
    "hybrid-minmax": {"fusion": "minmax"},
    "hybrid-dbsf": {"fusion": "dbsf"},
    "hybrid-title1": {"lexical": {"title_weight": 1.0}},
    "hybrid-doc": {"dense": "dense-doc"},
}

#: Imported before a system's process is forked, so that library code is not counted
#: as the system's memory. Keyed by system, peer or embedding backend.
PREIMPORT: dict[str, tuple[str, ...]] = {
    "rank_bm25": ("rank_bm25", "Stemmer"),
    "bm25s": ("bm25s", "Stemmer"),
    "tantivy": ("tantivy",),
    "minilm": ("torch", "sentence_transformers"),
}

Progress = Callable[[str, int, int], None]


@dataclass
class SystemRun:
    """What one system produced: its hits per query, its timings and its memory."""

    system: str
    index_s: float
    index_cached: bool
    latencies_ms: list[float] = field(default_factory=list)
    run: dict[str, list[str]] = field(default_factory=dict)  # query id -> ranked doc ids
    scores: dict[str, list[float]] = field(default_factory=dict)  # the systems' own scores
    peak_rss_mb: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(eq=False)
class Bench:
    """Builds each system once and shares parts (a hybrid reuses its halves)."""

    dataset: BeirDataset
    registry: Registry
    _: KW_ONLY
    cache_dir: Path
    scratch: Path
    progress: Progress | None = None
    #: ``profile:``, ``kb:`` and ``kind:`` systems (:mod:`kairox.bench.profile`).
    systems: Systems | None = None
    #: How a hit maps to a judged id (:mod:`kairox.bench.judgments`).
    matcher: IdMatcher | None = None
    _built: dict[str, tuple[Source, float, bool]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.systems is None:
            self.systems = Systems(None)

    # -- systems ----------------------------------------------------------------------

    def available(self) -> list[str]:
        local = [k for k in self.registry.knowledge_base_kinds if k in LOCAL_KIND_OPTIONS]
        peers = [p for p in PEERS if self.peer_missing(p) is None]
        return [*local, *peers, *DENSE_ALIASES, *HYBRIDS, "dense:<backend>"]

    @staticmethod
    def peer_missing(name: str) -> str | None:
        """Why peer ``name`` cannot run (with an install hint), or ``None`` when it can."""
        for module in PEERS[name]:
            if not _installed(module):
                return f"peer {name!r} is not installed: {INSTALL_HINTS[name]}"
        return None

    def check(self, name: str) -> None:
        """Raise :class:`BenchError` (with an install hint) unless ``name`` can be built."""
        if "+" in name:  # SYSTEM+rerank:NAME, SYSTEM+transform:NAME (kairox.bench.stages)
            from kairox.bench.stages import check_stages, split_staged

            base, stages = split_staged(name)
            self.check(base)
            check_stages(stages, self.registry)
        elif name.startswith(PREFIXES):
            self.systems.check(name, self)
        elif name in HYBRIDS:
            self.check("sqlite-fts")
            self.check("dense")
        elif name in PEERS:
            missing = self.peer_missing(name)
            if missing is not None:
                raise BenchError(missing)
        elif name in DENSE_ALIASES or name.startswith("dense:"):
            backend = DENSE_ALIASES.get(name) or name.split(":", 1)[1]
            if backend not in self.registry.embedding_backends:
                hint = (
                    f" (install it: {INSTALL_HINTS[backend]})" if backend in INSTALL_HINTS else ""
                )
                known = ", ".join(sorted(self.registry.embedding_backends))
                raise BenchError(f"no embedding backend {backend!r}{hint}; installed: {known}")
        elif name in LOCAL_KIND_OPTIONS or name in self.registry.knowledge_base_kinds:
            if name not in self.registry.knowledge_base_kinds:
                hint = f" (install it: {INSTALL_HINTS[name]})" if name in INSTALL_HINTS else ""
                raise BenchError(f"knowledge-base kind {name!r} is not installed{hint}")
            if name not in LOCAL_KIND_OPTIONS:
                raise BenchError(f"kind {name!r} has no local benchmark set-up")
        else:
            raise BenchUsageError(
                f"unknown system {name!r}{did_you_mean(name, self.available())}; available: "
                f"{', '.join(self.available())}, profile:NAME, kb:ID, kind:NAME"
                + (f" (install it: {INSTALL_HINTS[name]})" if name in INSTALL_HINTS else "")
            )

    def system(self, name: str) -> tuple[Source, float, bool]:
        """(source, index seconds, whether the index came from the cache)."""
        if name not in self._built:
            self.check(name)
            self._built[name] = self._build(name)
        return self._built[name]

    def system_with(self, kind_name: str, options: Mapping[str, Any]) -> tuple[Source, float, bool]:
        """A local kind built with extra settings (``{"title_weight": 3}``), once each."""
        if not options:
            return self.system(kind_name)
        key = f"{kind_name} {json.dumps(dict(options), sort_keys=True)}"
        if key not in self._built:
            self.check(kind_name)
            self._built[key] = self._lexical(kind_name, options)
        return self._built[key]

    def _build(self, name: str) -> tuple[Source, float, bool]:
        if "+" in name:
            return self._staged(name)
        if name.startswith(PREFIXES):
            return self.systems.build(name, self)
        if name in HYBRIDS:
            return self._hybrid(name, "sqlite-fts", "dense")
        if name in PEERS:
            return self._peer(name)
        if name in DENSE_ALIASES or name.startswith("dense:"):
            return self._dense(DENSE_ALIASES.get(name) or name.split(":", 1)[1], name)
        return self._lexical(name)

    def _staged(self, name: str) -> tuple[Source, float, bool]:
        from kairox.bench.stages import build_staged, split_staged

        base_name, stages = split_staged(name)
        base, index_s, cached = self.system(base_name)
        # A stage compares passages with the base system's model; hashing only if that is
        # what the base searches with, or no other backend is installed.
        hashing_only = "hashing" in base_name or "minilm" not in self.registry.embedding_backends
        staged = build_staged(
            base,
            stages,
            self.registry,
            embedding_backend=self._backend,
            embedding_name="hashing" if hashing_only else "minilm",
            candidates=DEPTH,
        )
        staged.name = name  # type: ignore[attr-defined]
        return staged, index_s, cached  # type: ignore[return-value]

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

    def _lexical(
        self, kind_name: str, options: Mapping[str, Any] | None = None
    ) -> tuple[Source, float, bool]:
        kind = self.registry.knowledge_base_kinds[kind_name]
        suffix = re.sub(r"[^A-Za-z0-9_.-]+", "_", json.dumps(dict(options or {}), sort_keys=True))
        folder = self.scratch / (kind_name + (suffix if options else ""))
        folder.mkdir(parents=True, exist_ok=True)
        config = kind.config_model(
            kind=kind_name, **LOCAL_KIND_OPTIONS[kind_name], **dict(options or {})
        )
        source = kind.factory(kind_name, config, self._context(folder))
        return fill(self, source, kind_name, kind_name)

    def _peer(self, name: str) -> tuple[Source, float, bool]:
        ids = list(self.dataset.corpus)
        texts = [f"{title}\n{text}".strip() for title, text in self.dataset.corpus.values()]
        self._report(f"indexing {name}", 0, 1)
        started = time.perf_counter()
        source = PEER_CLASSES[name](name, ids, texts)
        seconds = time.perf_counter() - started
        self._report(f"indexing {name}", 1, 1)
        return source, seconds, False

    def _dense(self, backend_name: str, system: str) -> tuple[Source, float, bool]:
        backend = self._backend(backend_name)
        ids = list(self.dataset.corpus)
        texts = [f"{title}\n{text}".strip() for title, text in self.dataset.corpus.values()]
        matrix, seconds, cached = self._embeddings(backend, ids, texts, system)
        if system in WHOLE_DOCUMENT_ONLY:
            return VectorSource(system, backend, ids, texts, matrix), seconds, cached
        # The sentences of the very text embedded whole, as the workspace index splits its
        # chunks: a title of its own line is a sentence too.
        owners: list[int] = []
        sentence_keys: list[str] = []
        sentence_texts: list[str] = []
        for row, text in enumerate(texts):
            for sentence in split_sentences(text):
                owners.append(row)
                sentence_keys.append(f"{ids[row]}:{sentence.start}")
                sentence_texts.append(sentence.text)
        vectors, sentence_seconds, sentences_cached = self._embeddings(
            backend, sentence_keys, sentence_texts, system, part="sentences"
        )
        source = VectorSource(
            system,
            backend,
            ids,
            texts,
            matrix,
            sentences=SentenceVectors(vectors, np.asarray(owners, dtype=np.int64)),
        )
        return source, seconds + sentence_seconds, cached and sentences_cached

    def _embeddings(
        self, backend: Any, ids: list[str], texts: list[str], system: str, part: str = ""
    ) -> tuple[np.ndarray, float, bool]:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", backend.name)
        suffix = f"-{part}" if part else ""
        cache = (
            self.cache_dir / f"{self.dataset.corpus_sha256[:20]}-{safe}-{backend.dim}{suffix}.npz"
        )
        if cache.is_file():
            stored = np.load(cache, allow_pickle=False)
            if list(stored["ids"]) == ids:
                return stored["matrix"], float(stored["seconds"]), True
        started = time.perf_counter()
        parts = []
        for start in range(0, len(texts), EMBED_BATCH):
            parts.append(np.asarray(backend.embed(texts[start : start + EMBED_BATCH]), np.float32))
            what = f"embedding {part or 'corpus'} ({system})"
            self._report(what, start + EMBED_BATCH, len(texts))
        matrix = np.vstack(parts) if parts else np.zeros((0, backend.dim), np.float32)
        seconds = time.perf_counter() - started
        # A cache of Kairox's (under $KAIROX_HOME/cache): owner-only, as its state is.
        private_folder(cache.parent)
        partial = private_file(cache.with_suffix(".partial.npz"))
        np.savez(partial, ids=np.asarray(ids), matrix=matrix, seconds=np.float64(seconds))
        partial.replace(cache)  # never leave a half-written cache behind
        return matrix, seconds, False

    def _hybrid(self, name: str, lexical: str, dense: str) -> tuple[Source, float, bool]:
        from kairox.retrieval.composite import CompositeWorkspaceRetriever

        settings = dict(HYBRIDS[name])
        dense = settings.pop("dense", dense)
        parts = [self.system_with(lexical, settings.pop("lexical", {})), self.system(dense)]
        composite = CompositeWorkspaceRetriever(
            [source for source, _, _ in parts],
            default_timeout_ms=600_000,
            candidates=DEPTH,
            **settings,
        )
        composite.name = name  # type: ignore[attr-defined]
        return composite, sum(s for _, s, _ in parts), all(c for _, _, c in parts)

    def _report(self, what: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(what, min(done, total), total)

    # -- running --------------------------------------------------------------------

    def run(self, name: str) -> SystemRun:
        """Build ``name`` (if not built yet) and ask it every query, timing each."""
        source, index_s, cached = self.system(name)
        result = SystemRun(name, index_s, cached)
        if isinstance(source, _PeerSource):
            result.notes["stemmed"] = source.stemmed
        queries = list(self.dataset.queries.items())
        matcher = self.matcher
        if matcher is not None:
            check_coverage(self, name, source, matcher.judged)

        async def ask_all() -> None:
            if queries:  # warm-up, untimed: loads a model, fills caches
                await source.retrieve(Query(queries[0][1], k=DEPTH))
            for done, (qid, text) in enumerate(queries, start=1):
                started = time.perf_counter()
                answer = await source.retrieve(Query(text, k=DEPTH))
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                hits = getattr(answer, "hits", answer)  # a composite returns a result
                if matcher is None:
                    result.run[qid] = [hit.id for hit in hits]
                else:  # judged ids may name documents, uris or lines; one rank each
                    result.run[qid] = matcher.ranking(hits)
                result.scores[qid] = [float(hit.score) for hit in hits]
                record_failures(result, qid, answer)
                record_contributions(result, answer)
                self._report(f"querying {name}", done, len(queries))

        asyncio.run(ask_all())
        return result


# -- memory: one forked process per system --------------------------------------------


def _preimport(names: Sequence[str]) -> None:
    wanted: list[str] = []
    for name in names:
        keys = [name]
        if name in HYBRIDS:
            keys = ["dense"]
        if keys[0] in DENSE_ALIASES:
            keys.append(DENSE_ALIASES[keys[0]])
        for key in keys:
            wanted.extend(PREIMPORT.get(key, ()))
    for module in dict.fromkeys(wanted):
        if _installed(module):
            importlib.import_module(module)


# -- the report -----------------------------------------------------------------------


def expand_systems(names: Sequence[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Expand ``peers`` (installed peers) and ``hybrids``; returns (systems, skipped peers)."""
    systems: list[str] = []
    skipped: list[dict[str, str]] = []
    for name in names:
        if name == "peers":
            for peer in PEERS:
                missing = Bench.peer_missing(peer)
                if missing is None:
                    systems.append(peer)
                else:
                    skipped.append({"system": peer, "reason": missing})
        elif name == "hybrids":
            systems.extend(HYBRIDS)
        else:
            systems.append(name)
    return list(dict.fromkeys(systems)), skipped


def benchmark(
    dataset: BeirDataset,
    systems: Sequence[str],
    registry: Registry,
    *,
    cache_dir: Path,
    progress: Progress | None = None,
    isolate: bool | None = None,
    run_dir: Path | None = None,
    systems_from: Systems | None = None,
    matcher: IdMatcher | None = None,
) -> dict[str, Any]:
    """Run every system on ``dataset``; returns the report written by ``--out``.

    :param systems: system names; ``peers`` stands for every installed peer (the others
        are listed under ``skipped`` with an install hint) and ``hybrids`` for every
        entry of :data:`HYBRIDS`.
    :param isolate: run each system in its own forked process and measure its peak
        memory (default: when the platform can); ``False`` runs them all here and
        reports ``peak_rss_mb`` as ``None``.
    :param run_dir: also write one TREC run file per system there (``<system>.trec``).
    :param systems_from: resolves ``profile:``, ``kb:`` and ``kind:`` names; facade
        systems always run in this process (their sources, threads and connections
        belong to it), so their ``peak_rss_mb`` is ``None``.
    :param matcher: maps hits to judged ids (default: the hit's id, as BEIR needs).
    """
    _need_ir_measures()
    names, skipped = expand_systems(systems)
    if isolate is None:
        isolate = can_isolate()
    results = []
    by_query: dict[str, dict[str, dict[str, float]]] = {}
    runs: dict[str, SystemRun] = {}
    latencies: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="kairox-bench-") as scratch:
        bench = Bench(
            dataset,
            registry,
            cache_dir=cache_dir,
            scratch=Path(scratch),
            progress=progress,
            systems=systems_from,
            matcher=matcher,
        )
        for name in names:  # check everything first so an unknown name fails fast
            bench.check(name)
        if isolate:
            _preimport(names)
        else:
            for name in names:
                bench.system(name)
        for name in names:
            alone = isolate and not is_external(name)
            runs[name] = run_isolated(bench, name) if alone else bench.run(name)
            if matcher is not None:
                check_returned(name, matcher.judged, runs[name].run)
    for name, ran in runs.items():
        values = per_query(dataset, ran.run)
        by_query[name] = {metric: values[metric] for metric in METRICS}
        mean_ms = statistics.fmean(ran.latencies_ms) if ran.latencies_ms else 0.0
        results.append(
            {
                "system": name,
                **{metric: statistics.fmean(values[metric].values()) for metric in METRICS},
                "index_s": round(ran.index_s, 3),
                "index_cached": ran.index_cached,
                "p50_ms": round(percentile(ran.latencies_ms, 50), 3),
                "p95_ms": round(percentile(ran.latencies_ms, 95), 3),
                "qps": round(1000 / mean_ms, 1) if mean_ms else 0.0,
                "peak_rss_mb": ran.peak_rss_mb,
                "queries": len(ran.run),
                **ran.notes,
            }
        )
        latencies[name] = [round(ms, 3) for ms in ran.latencies_ms]
    reference = next((r for r in results if r["system"] == "rank_bm25"), None)
    if reference is not None and reference["qps"]:
        for row in results:
            row["qps_vs_rank_bm25"] = round(row["qps"] / reference["qps"], 2)
    if run_dir is not None:
        write_runs(runs, run_dir)
    return {
        "dataset": str(dataset.path),
        "split": dataset.split,
        # Your --queries/--qrels against a profile's own sources: no corpus was loaded, so
        # the judged documents are what is known (`documents` then is None).
        "documents": len(dataset.corpus) if dataset.corpus else None,
        "judged_documents": len(judged_ids(dataset)),
        "queries": len(dataset.queries),
        "depth": DEPTH,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "memory": "peak_rss_mb: VmHWM minus VmRSS at the fork of a process running that system alone"
        if isolate
        else "not measured (systems ran in one process)",
        "systems": results,
        "skipped": skipped,
        "per_query": by_query,
        "latencies_ms": latencies,
    }


# -- comparing two runs -----------------------------------------------------------------
