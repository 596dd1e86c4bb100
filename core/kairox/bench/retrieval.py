"""``kairox bench retrieval``: quality, speed and memory of retrieval systems on one BEIR dataset.

Every Kairox system is a real Kairox source driven through its public interface:

* a knowledge-base kind that accepts documents (``sqlite-fts``, ``tantivy``, ...) is
  built from the plugin registry with its default settings, filled with the corpus and
  queried;
* ``dense`` (all-MiniLM-L6-v2, from ``kairox-sentence-transformers``), ``hashing``
  and ``dense:<backend>`` search the corpus sentence-aware as the workspace index does
  (:mod:`kairox.bench.dense_systems`); ``dense-doc`` is ``dense`` with one vector per
  document only, the way it searched before;
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

from kairox.bench import BenchError
from kairox.bench.beir import BeirDataset
from kairox.bench.dense_systems import CorpusVectors, dense_source
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
from kairox.bench.system_names import (
    DENSE_ALIASES,
    HYBRIDS,
    LOCAL_KIND_OPTIONS,
    WHOLE_DOCUMENT_ONLY,
    install_hint,
    peer_missing,
    preimport,
)
from kairox.plugin_host.registry import BuildContext, Registry
from kairox.retrieval import Query, Source

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

    peer_missing = staticmethod(peer_missing)

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
                raise self._no_backend(backend)
        elif name in LOCAL_KIND_OPTIONS or name in self.registry.knowledge_base_kinds:
            if name not in self.registry.knowledge_base_kinds:
                raise BenchError(
                    f"knowledge-base kind {name!r} is not installed{install_hint(name)}"
                )
            if name not in LOCAL_KIND_OPTIONS:
                raise BenchError(f"kind {name!r} has no local benchmark set-up")
        else:
            raise BenchUsageError(
                f"unknown system {name!r}{did_you_mean(name, self.available())}; available: "
                f"{', '.join(self.available())}, profile:NAME, kb:ID, kind:NAME"
                + install_hint(name)
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
            raise self._no_backend(name)
        return spec.factory()

    def _no_backend(self, name: str) -> BenchError:
        known = ", ".join(sorted(self.registry.embedding_backends))
        return BenchError(f"no embedding backend {name!r}{install_hint(name)}; installed: {known}")

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
        ids = list(self.dataset.corpus)
        texts = [f"{title}\n{text}".strip() for title, text in self.dataset.corpus.values()]
        vectors = CorpusVectors(
            self._backend(backend_name),
            self.cache_dir,
            self.dataset.corpus_sha256,
            lambda what, done, total: self._report(f"{what} ({system})", done, total),
        )
        return dense_source(
            system, vectors, ids, texts, sentences=system not in WHOLE_DOCUMENT_ONLY
        )

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
            preimport(names)
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
