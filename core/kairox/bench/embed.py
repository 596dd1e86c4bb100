"""``kairox bench embed``: embedding speed, agreement and quality of several backends.

In one run, on a fixed sample of a BEIR corpus' documents (title and text, as the
retrieval benchmark embeds them): documents per second of each backend, timed in
interleaved rounds (each round runs every backend once, the order rotating) and reported
as medians, so a machine whose load changes treats all alike; the cosine of each
backend's vectors with the first backend's (min and mean); the useful FLOP rate (MiniLM's
arithmetic on the unpadded tokens, over the wall time) against the machine's peak, read
from its CPU features. With ``ndcg`` the full corpus is indexed by each backend and nDCG@10
of ``dense`` and ``hybrid`` reported (slow: every document and sentence is embedded).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench.beir import BeirDataset
from kairox.bench.report import created_now, machine
from kairox.plugin_host.registry import Registry
from kairox.support.errors import KairoxError

#: all-MiniLM-L6-v2's shape: layers, hidden width, feed-forward width.
MINILM_SHAPE = (6, 384, 1536)


class EmbedBenchError(KairoxError, ValueError):
    """The embedding benchmark cannot run as asked."""


def cpu_features() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_ghz() -> float | None:
    """The clock the kernel reports for the first CPU, in GHz (``None`` if unknown)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("cpu MHz"):
                    return float(line.split(":", 1)[1]) / 1000
    except (OSError, ValueError):
        pass
    return None


def peak_flops(features: set[str], cores: int, ghz: float | None) -> dict[str, float | None]:
    """Peak arithmetic rates (FLOP/s or int8 op/s) from the widest vector unit found.

    Assumes two fused multiply-add pipes a core (two operations each per lane); fp32
    lanes are 16 with AVX-512, 8 with AVX2/FMA, else 4; bf16 dot products (AVX-512 BF16)
    do two multiply-adds per 32-bit lane, int8 ones (VNNI) four. AMX tiles, where present, are listed but not counted.
    """
    if ghz is None:
        return {"fp32": None, "bf16": None, "int8": None}
    lanes = 16 if "avx512f" in features else 8 if {"avx2", "fma"} <= features else 4
    fp32 = cores * ghz * 1e9 * lanes * 2 * 2
    vnni = "avx512_vnni" in features or "avx_vnni" in features
    # VDPBF16PS: two bf16 products summed into each fp32 lane, twice the fp32 FMA rate.
    bf16 = fp32 * 2 if "avx512_bf16" in features else fp32
    return {"fp32": fp32, "bf16": bf16, "int8": fp32 * 4 if vnni else fp32}


def minilm_flops(token_counts: Sequence[int]) -> float:
    """Multiply-adds x 2 of a MiniLM forward pass over texts of these token counts
    (projections, feed-forward and attention scores; no padding counted)."""
    layers, hidden, ff = MINILM_SHAPE
    n = np.asarray(token_counts, dtype=np.float64)
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * ff)
    return float(layers * (n.sum() * per_token + (4 * hidden * n * n).sum()))


def sample_texts(dataset: BeirDataset, size: int) -> list[str]:
    """The first ``size`` documents of the corpus, as ``title\\ntext``."""
    texts = [f"{title}\n{text}".strip() for title, text in dataset.corpus.values()]
    return texts[:size] if size > 0 else texts


def _token_counts(backends: dict[str, Any], texts: list[str]) -> list[int] | None:
    for backend in backends.values():
        counter = getattr(backend, "token_counts", None)
        if callable(counter):
            return list(counter(texts))
    return None


def measure_speed(
    backends: dict[str, Any],
    texts: list[str],
    rounds: int,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Seconds of each round per backend (interleaved, rotating order) and the vectors."""
    names = list(backends)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    vectors: dict[str, np.ndarray] = {}
    for name in names:  # warm-up, untimed: loads the model, fills caches
        backends[name].embed(texts[:8])
    total = rounds * len(names)
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for step, name in enumerate(order):
            started = time.perf_counter()
            out = np.asarray(backends[name].embed(texts), dtype=np.float32)
            seconds[name].append(time.perf_counter() - started)
            vectors[name] = out
            if progress is not None:
                progress("embedding the sample", round_ * len(names) + step + 1, total)
    return seconds, vectors


def _ndcg(
    dataset: BeirDataset, names: Sequence[str], registry: Registry, cache_dir: Path
) -> dict[str, dict[str, float]]:
    """nDCG@10 of ``dense`` and ``hybrid`` over the full corpus with each backend."""
    import tempfile

    from kairox.bench.metrics import per_query
    from kairox.bench.retrieval import Bench

    results: dict[str, dict[str, float]] = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="kairox-bench-embed-") as scratch:
            # A cache folder per backend: two backends may share a vector name (the fp32
            # paths do), and the cache is keyed by that name.
            bench = Bench(dataset, registry, cache_dir=cache_dir / name, scratch=Path(scratch))
            dense = f"dense:{name}"
            bench._built["hybrid"] = bench._hybrid("hybrid", "sqlite-fts", dense)
            row = {}
            for system, key in ((dense, "dense"), ("hybrid", "hybrid")):
                values = per_query(dataset, bench.run(system).run)["ndcg@10"]
                row[key] = statistics.fmean(values.values())
            results[name] = row
    return results


def benchmark_embed(
    dataset: BeirDataset,
    names: Sequence[str],
    registry: Registry,
    *,
    sample: int = 1000,
    rounds: int = 3,
    ndcg: bool = False,
    cache_dir: Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The report of ``kairox bench embed``; the first backend is the reference."""
    if not names:
        raise EmbedBenchError("name at least one embedding backend")
    missing = [n for n in names if n not in registry.embedding_backends]
    if missing:
        known = ", ".join(sorted(registry.embedding_backends))
        raise EmbedBenchError(f"no embedding backend {missing[0]!r}; installed: {known}")
    if rounds < 1:
        raise EmbedBenchError(f"rounds must be at least 1, got {rounds}")
    backends = {name: registry.embedding_backends[name].factory() for name in names}
    texts = sample_texts(dataset, sample)
    seconds, vectors = measure_speed(backends, texts, rounds, progress)
    tokens = _token_counts(backends, texts)
    flops = minilm_flops(tokens) if tokens is not None else None
    features = cpu_features()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    peaks = peak_flops(features, cores or 1, cpu_ghz())
    reference = names[0]
    rows = []
    for name in names:
        median = statistics.median(seconds[name])
        agreement = np.sum(vectors[name] * vectors[reference], axis=1)
        precision = getattr(backends[name], "precision", "fp32")
        rate = flops / median if flops is not None else None
        peak = peaks.get(precision, peaks["fp32"])
        rows.append(
            {
                "backend": name,
                "vectors": backends[name].name,
                "precision": precision,
                "docs_per_s": len(texts) / median,
                "seconds": [round(s, 3) for s in seconds[name]],
                "speedup": statistics.median(seconds[reference]) / median,
                "cosine_min": float(agreement.min()),
                "cosine_mean": float(agreement.mean()),
                "gflops": None if rate is None else rate / 1e9,
                "of_peak": None if rate is None or not peak else rate / peak,
            }
        )
    report: dict[str, Any] = {
        "dataset": str(dataset.path),
        "documents": len(texts),
        "tokens": None if tokens is None else int(sum(tokens)),
        "rounds": rounds,
        "reference": reference,
        "created": created_now(),
        "machine": machine(),
        "cpu_features": sorted(
            f for f in features if f.startswith(("avx512", "amx", "avx_vnni")) or f == "avx2"
        ),
        "peak_gflops": {k: None if v is None else v / 1e9 for k, v in peaks.items()},
        "backends": rows,
    }
    if ndcg:
        if cache_dir is None:
            raise EmbedBenchError("nDCG needs a cache folder for the corpus vectors")
        scores = _ndcg(dataset, names, registry, cache_dir)
        for row in rows:
            row["ndcg@10_dense"] = scores[row["backend"]]["dense"]
            row["ndcg@10_hybrid"] = scores[row["backend"]]["hybrid"]
    return report
