"""``kairox bench composite``: what fanning out through the composite retriever costs.

Two measurements.

**Fan-out overhead.** N sources (1, 2, 4, 8 by default) answer every query, once each on
its own and once together through :class:`~kairox.retrieval.composite.CompositeWorkspaceRetriever`.
The overhead of one query is the composite's latency minus the latency of the slowest of
its sources asked alone (so a perfect fan-out costs 0); its p50 and p95 are reported. So
is the CPU time the sources take asked one by one, over the number of cores: the least
time sources that compute rather than wait could take in any fan-out on this machine.
Each row is held to a bound (:func:`fan_out_bound`): 1.2 x the slowest source + 2 ms
for sources that wait, max(1.2 x the slowest, the CPU floor) + 2 ms for sources that
compute.
The sources are

* ``sqlite-fts`` (or another local ``--kind``): N knowledge bases of that kind, built
  through the plugin registry, each holding the same small generated corpus;
* ``sleep-async``: synthetic sources that take a fixed time in ``asyncio.sleep``;
* ``sleep-thread``: synthetic sources that block a worker thread for a fixed time, as a
  synchronous client library does (``asyncio.to_thread``).

Each is measured on both ways in: ``sync`` is ``retrieve_sync`` (what the CLI and a
session turn use: a private event loop per call over worker threads the composite keeps)
and ``async`` is ``await retrieve`` on a long-lived loop whose default executor has a
worker per blocking source, as the composite's documentation advises. The sources' solo
latencies are measured on the long-lived loop, the way ``retrieve`` itself awaits them.

**Faults.** Healthy sources next to one that hangs (it blocks a thread and ignores
cancellation) and one that fails at once, through ``retrieve_sync``. The composite must
come back at about the slow source's deadline, report ``timeout`` and ``error`` for the
two, and return the healthy sources' hits.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kairox.bench.report import created_now, machine, percentile
from kairox.bench.synthetic_sources import (
    FailingSource,
    HangingSource,
    SleepSource,
    make_corpus,
    make_queries,
)
from kairox.plugin_host.registry import BuildContext, Registry
from kairox.retrieval import (
    Document,
    IngestableSource,
    Query,
    Source,
    SourceStatus,
)
from kairox.retrieval.composite import CompositeWorkspaceRetriever
from kairox.support.errors import KairoxError

__all__ = [
    "DEFAULT_SOURCE_COUNTS",
    "SCENARIOS",
    "CompositeBenchError",
    "benchmark",
    "fan_out",
    "faults",
]

DEFAULT_SOURCE_COUNTS = (1, 2, 4, 8)
#: ``local`` is replaced by the ``--kind`` name (``sqlite-fts`` by default).
SCENARIOS = ("local", "sleep-async", "sleep-thread")
PATHS = ("sync", "async")
#: Where each local kind keeps its files inside its scratch folder.
LOCAL_KIND_OPTIONS = {"sqlite-fts": {"path": "index.db"}, "tantivy": {"index_dir": "index"}}
# Deadline for the fan-out runs: far above any latency, so nothing times out by accident.
FAN_OUT_DEADLINE_MS = 60_000
#: What the fan-out bound allows on top of the slowest source (or the CPU floor), in ms.
BOUND_SLACK_MS = 2.0
#: The cores sources can run on in parallel, for the CPU floor.
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

Progress = Callable[[str, int, int], None]


class CompositeBenchError(KairoxError, ValueError):
    """The composite benchmark cannot run as asked (unknown kind, bad size...)."""


# -- building sources ---------------------------------------------------------------------


def _local_sources(
    registry: Registry, kind_name: str, count: int, corpus: Sequence[Document], scratch: Path
) -> list[Source]:
    kind = registry.knowledge_base_kinds.get(kind_name)
    if kind is None:
        hint = " (install it: kairox install kairox-tantivy)" if kind_name == "tantivy" else ""
        raise CompositeBenchError(f"knowledge-base kind {kind_name!r} is not installed{hint}")
    options = LOCAL_KIND_OPTIONS.get(kind_name)
    if options is None:
        raise CompositeBenchError(
            f"kind {kind_name!r} has no local benchmark set-up; "
            f"use one of {', '.join(LOCAL_KIND_OPTIONS)}"
        )
    sources = []
    for number in range(count):
        folder = scratch / f"{kind_name}-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        ctx = BuildContext(
            workspace_root=folder,
            state_dir=folder,
            base_dir=folder,
            embedding_backend=_no_embedding_backend,
        )
        config = kind.config_model(kind=kind_name, **options)
        source = kind.factory(f"kb-{number}", config, ctx)
        if not isinstance(source, IngestableSource):
            raise CompositeBenchError(f"kind {kind_name!r} cannot be filled with documents")
        source.upsert(list(corpus))
        sources.append(source)
    return sources


def _no_embedding_backend(name: str) -> Any:
    raise CompositeBenchError("the composite benchmark uses lexical sources only")


# -- measuring ------------------------------------------------------------------------------


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
    }


def _measure(
    sources: Sequence[Source],
    queries: Sequence[str],
    *,
    k: int,
    warmup: int,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Solo, ``retrieve_sync`` and ``retrieve`` latencies per query, in milliseconds.

    ``queries`` holds ``warmup`` untimed queries, then the timed ones.
    """
    composite = CompositeWorkspaceRetriever(sources, default_timeout_ms=FAN_OUT_DEADLINE_MS)
    depth = max(k, 20)  # what the composite asks each source for
    loop = asyncio.new_event_loop()
    # As the composite's docs advise a long-lived loop: a worker per blocking source (the
    # default, min(32, CPUs + 4), would run 8 of them in two rounds on 2 cores).
    loop.set_default_executor(ThreadPoolExecutor(max_workers=2 * len(sources) + 1))
    slowest: list[float] = []
    summed: list[float] = []
    solo_cpu: list[float] = []
    composite_cpu: list[float] = []
    timed: dict[str, list[float]] = {path: [] for path in PATHS}
    not_ok = 0
    try:
        # The first ``warmup`` queries are not timed.
        for number, text in enumerate(queries, start=-warmup):
            solo = []
            cpu_started = time.process_time()
            for source in sources:
                started = time.perf_counter()
                loop.run_until_complete(source.retrieve(Query(text, k=depth)))
                solo.append((time.perf_counter() - started) * 1000)
            solo_cpu_ms = (time.process_time() - cpu_started) * 1000
            cpu_started = time.process_time()
            started = time.perf_counter()
            result = composite.retrieve_sync(Query(text, k=k))
            sync_ms = (time.perf_counter() - started) * 1000
            composite_cpu_ms = (time.process_time() - cpu_started) * 1000
            not_ok += sum(r.status is not SourceStatus.OK for r in result.reports)
            started = time.perf_counter()
            result = loop.run_until_complete(composite.retrieve(Query(text, k=k)))
            async_ms = (time.perf_counter() - started) * 1000
            not_ok += sum(r.status is not SourceStatus.OK for r in result.reports)
            if number < 0:
                continue  # warm-up: caches, thread start-up, first-use imports
            slowest.append(max(solo))
            summed.append(sum(solo))
            solo_cpu.append(solo_cpu_ms)
            composite_cpu.append(composite_cpu_ms)
            timed["sync"].append(sync_ms)
            timed["async"].append(async_ms)
            if progress is not None:
                progress(number + 1)
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        composite.close()
    return {
        "slowest": slowest,
        "summed": summed,
        "solo_cpu": solo_cpu,
        "composite_cpu": composite_cpu,
        "timed": timed,
        "not_ok": not_ok,
    }


def fan_out(
    registry: Registry,
    *,
    kind: str,
    source_counts: Sequence[int],
    queries: int,
    documents: int,
    delay_ms: float,
    scenarios: Sequence[str],
    scratch: Path,
    progress: Progress | None,
    k: int = 10,
    warmup: int = 5,
) -> list[dict[str, Any]]:
    """One row per scenario x source count x path (``sync``/``async``)."""
    if not source_counts or any(n < 1 for n in source_counts):
        raise CompositeBenchError(f"source counts must be >= 1, got {list(source_counts)}")
    if queries < 1:
        raise CompositeBenchError(f"queries must be >= 1, got {queries}")
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        raise CompositeBenchError(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    texts = make_queries(queries + warmup)
    corpus = make_corpus(documents) if "local" in scenarios else []
    rows = []
    for scenario in scenarios:
        label = kind if scenario == "local" else scenario
        local = (
            _local_sources(registry, kind, max(source_counts), corpus, scratch / kind)
            if scenario == "local"
            else []
        )
        for count in source_counts:
            if scenario == "local":
                sources: list[Source] = local[:count]
            else:
                blocking = scenario == "sleep-thread"
                sources = [SleepSource(f"s{i}", delay_ms / 1000, blocking) for i in range(count)]
            what = f"{label} x{count}"

            def tick(done: int, what: str = what) -> None:
                if progress is not None:
                    progress(what, done, queries)

            measured = _measure(sources, texts, k=k, warmup=warmup, progress=tick)
            slowest = measured["slowest"]
            for path in PATHS:
                latencies = measured["timed"][path]
                overhead = [c - s for c, s in zip(latencies, slowest, strict=True)]
                rows.append(
                    {
                        "scenario": label,
                        "sources": count,
                        "path": path,
                        "queries": len(latencies),
                        "slowest_source_ms": _stats(slowest),
                        # what asking the sources one after the other would cost
                        "sources_in_sequence_ms": _stats(measured["summed"]),
                        # CPU time (every thread of the process) the sources take asked one
                        # by one, and the sync composite takes; the first over the CPU
                        # count is the least time any fan-out of CPU-bound sources can take
                        "sources_cpu_ms": _stats(measured["solo_cpu"]),
                        "composite_cpu_ms": _stats(measured["composite_cpu"]),
                        "cpu_floor_ms": _stats([c / CPUS for c in measured["solo_cpu"]]),
                        "composite_ms": _stats(latencies),
                        "overhead_ms": _stats(overhead),
                        "not_ok_reports": measured["not_ok"],
                    }
                )
                rows[-1].update(fan_out_bound(rows[-1], computes=scenario == "local"))
    return rows


def fan_out_bound(row: dict[str, Any], *, computes: bool) -> dict[str, Any]:
    """The acceptance bound of one fan-out row (p50s), and whether the composite met it.

    Sources that wait (a network answer, a blocking client's thread) can all wait at
    once: 1.2 x the slowest alone + 2 ms. Sources that compute share the machine's cores,
    so no fan-out beats the CPU floor (their CPU time over the cores): max(1.2 x the
    slowest alone, the CPU floor) + 2 ms.
    """
    slowest = 1.2 * row["slowest_source_ms"]["p50"]
    floor = row["cpu_floor_ms"]["p50"]
    bound = (max(slowest, floor) if computes else slowest) + BOUND_SLACK_MS
    return {
        "sources_compute": computes,
        "bound_ms": round(bound, 3),
        "bound_rule": (
            "max(1.2 x slowest, CPU floor) + 2 ms" if computes else "1.2 x slowest + 2 ms"
        ),
        "within_bound": row["composite_ms"]["p50"] <= bound,
    }


def faults(
    registry: Registry,
    *,
    kind: str = "sqlite-fts",
    healthy: int = 2,
    deadline_ms: int = 250,
    hang_s: float = 5.0,
    queries: int = 20,
    documents: int = 1000,
    k: int = 10,
    scratch: Path,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Healthy sources plus one hanging and one failing source, through ``retrieve_sync``.

    The hanging source's deadline is ``deadline_ms``; the others keep the composite's
    default (800 ms), which they never come near.
    """
    if healthy < 1:
        raise CompositeBenchError(f"healthy must be >= 1, got {healthy}")
    if hang_s * 1000 <= deadline_ms:
        raise CompositeBenchError("hang_s must be longer than the deadline, or nothing hangs")
    good = _local_sources(registry, kind, healthy, make_corpus(documents), scratch / "faults")
    slow = HangingSource("slow", hang_s)
    failing = FailingSource("failing")
    composite = CompositeWorkspaceRetriever(
        [*good, slow, failing], timeouts_ms={"slow": deadline_ms}
    )
    healthy_names = [source.name for source in good]
    latencies: list[float] = []
    statuses: dict[str, Counter[str]] = {
        name: Counter() for name in [*healthy_names, "slow", "failing"]
    }
    errors: dict[str, str] = {}
    hit_counts: list[int] = []
    hit_sources: set[str] = set()
    try:
        for number, text in enumerate(make_queries(queries), start=1):
            started = time.perf_counter()
            result = composite.retrieve_sync(Query(text, k=k))
            latencies.append((time.perf_counter() - started) * 1000)
            for report in result.reports:
                statuses[report.source][str(report.status)] += 1
                if report.error and report.source not in errors:
                    errors[report.source] = report.error
            hit_counts.append(len(result.hits))
            hit_sources.update(p.source for hit in result.hits for p in hit.sources)
            if progress is not None:
                progress("one slow + one failing", number, queries)
    finally:
        slow.release()
    overshoot = [latency - deadline_ms for latency in latencies]
    return {
        "sources": [*healthy_names, "slow", "failing"],
        "healthy_kind": kind,
        "deadline_ms": deadline_ms,
        "hang_s": hang_s,
        "queries": queries,
        "latency_ms": {**_stats(latencies), "max": round(max(latencies), 3)},
        "overshoot_ms": _stats(overshoot),
        "statuses": {name: dict(counts) for name, counts in statuses.items()},
        "errors": errors,
        "hits_per_query": {"min": min(hit_counts), "max": max(hit_counts)},
        "hits_from": sorted(hit_sources),
    }


def benchmark(
    registry: Registry,
    *,
    kind: str = "sqlite-fts",
    source_counts: Sequence[int] = DEFAULT_SOURCE_COUNTS,
    queries: int = 100,
    documents: int = 1000,
    delay_ms: float = 10.0,
    deadline_ms: int = 250,
    fault_queries: int = 20,
    scenarios: Sequence[str] = SCENARIOS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Both measurements; the report ``kairox bench composite --out`` writes."""
    with tempfile.TemporaryDirectory(prefix="kairox-bench-composite-") as folder:
        # Both measurements use the same kind, corpus size, scratch folder and progress.
        shared: dict[str, Any] = {
            "kind": kind,
            "documents": documents,
            "scratch": Path(folder),
            "progress": progress,
        }
        rows = fan_out(
            registry,
            source_counts=source_counts,
            queries=queries,
            delay_ms=delay_ms,
            scenarios=scenarios,
            **shared,
        )
        fault = faults(registry, deadline_ms=deadline_ms, queries=fault_queries, **shared)
    return {
        "benchmark": "composite_fan_out",
        "kind": kind,
        "documents": documents,
        "queries": queries,
        "delay_ms": delay_ms,
        "fan_out": rows,
        "faults": fault,
        "created": created_now(),
        "machine": machine(),
    }
