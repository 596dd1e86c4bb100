"""``kairox bench code``: code search over real packages, line windows versus syntax chunks.

The corpus and queries come from :mod:`kairox.bench.code_corpus`. For each chunking
(``lines``: whole-line windows; ``syntax``: tree-sitter chunks) and each embedding backend
the stripped corpus is indexed with :class:`~kairox.workspace.rag_index.WorkspaceRagIndex`,
the workspace index itself, and every query is asked of its words (FTS5), of its vectors,
and of both fused as ``kairox search`` fuses them (``convex``, each source weight 1). A hit
is relevant when it lies in the target function's file and the two line ranges overlap by
at least half of the shorter one (the chunk is mostly that function, or holds most of it).

MRR@10 counts the first relevant hit; Recall@10 is the share of queries with a relevant hit
in the top 10 (one target per query). The vector source's fusion weight is also tuned on
the queries' ``train`` half (a fixed hash of each query's id) and scored on the ``test``
half, so the shipped default can follow the data without reading the figures it is judged by.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox.bench import BenchError
from kairox.bench.code_corpus import CodeQuery, build_corpus
from kairox.bench.report import machine
from kairox.plugin_host.registry import Registry
from kairox.retrieval import FusedHit, Hit, ScoreKind, fuse
from kairox.retrieval.vectors import SENTENCE_WEIGHT, default_fusion_weight

__all__ = ["CHUNKINGS", "WEIGHT_GRID", "code_benchmark", "is_relevant"]

CHUNKINGS = ("lines", "syntax")
K = 10
#: Vector-source weights tried against FTS 1.0 on the train half.
WEIGHT_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
_FTS, _VECTOR = "workspace-fts", "workspace"
_KINDS = {_FTS: ScoreKind.BM25, _VECTOR: ScoreKind.COSINE}

Progress = Callable[[str, int, int], None]


def is_relevant(hit: Hit | FusedHit, query: CodeQuery) -> bool:
    """Same file, and line ranges overlapping by half of the shorter one or more."""
    meta = hit.metadata
    if meta.get("path") != query.relpath or "line_start" not in meta:
        return False
    first, last = int(meta["line_start"]), int(meta["line_end"])
    overlap = min(last, query.line_end) - max(first, query.line_start) + 1
    shorter = min(last - first + 1, query.line_end - query.line_start + 1)
    return overlap > 0 and 2 * overlap >= shorter


def _metrics(ranked: Mapping[str, Sequence[Any]], queries: Sequence[CodeQuery]) -> dict[str, Any]:
    reciprocal, found = [], []
    for query in queries:
        rank = next(
            (r for r, hit in enumerate(ranked[query.id][:K], 1) if is_relevant(hit, query)), None
        )
        reciprocal.append(1 / rank if rank else 0.0)
        found.append(1.0 if rank else 0.0)
    return {
        "mrr@10": statistics.fmean(reciprocal) if queries else 0.0,
        "recall@10": statistics.fmean(found) if queries else 0.0,
        "queries": len(queries),
    }


def _fused(
    fts: Mapping[str, Sequence[Hit]], vec: Mapping[str, Sequence[Hit]], weight: float
) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for qid in fts:
        fused = fuse(
            {_FTS: fts[qid], _VECTOR: vec[qid]},
            method="convex",
            weights={_VECTOR: weight},
            score_kinds=_KINDS,
            limit=K,
        )
        out[qid] = fused
    return out


def _index(
    corpus: Path,
    database: Path,
    backend: Any,
    chunking: str,
    chunk_tokens: int,
    chunk_overlap: int,
    sentence_weight: float,
) -> tuple[Any, float]:
    from kairox.workspace.rag_index import WorkspaceRagIndex

    index = WorkspaceRagIndex(
        database,
        corpus,
        backend,
        chunk_tokens=chunk_tokens,
        chunk_overlap=chunk_overlap,
        syntax_chunks=chunking == "syntax",
        sentence_weight=sentence_weight,
    )
    began = time.perf_counter()
    index.index()
    return index, time.perf_counter() - began


def code_benchmark(
    sdists: Path,
    work: Path,
    registry: Registry,
    *,
    embedders: Sequence[str] = ("hashing", "minilm"),
    chunk_tokens: int = 256,
    chunk_overlap: int = 32,
    sentence_weight: float = SENTENCE_WEIGHT,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the benchmark; returns the report (see the module docs for what it holds)."""
    for name in embedders:
        if name not in registry.embedding_backends:
            known = ", ".join(sorted(registry.embedding_backends))
            raise BenchError(f"no embedding backend {name!r}; installed: {known}")
    queries = build_corpus(sdists, work)
    if not queries:
        raise BenchError(f"the sdists in {sdists} gave no queries (no public documented functions)")
    corpus = Path(work) / "corpus"
    splits = {
        "all": queries,
        "train": [q for q in queries if q.split == "train"],
        "test": [q for q in queries if q.split == "test"],
    }
    rows: list[dict[str, Any]] = []
    tuning: dict[str, Any] = {}
    backends = {name: registry.embedding_backends[name].factory() for name in embedders}
    for chunking in CHUNKINGS:
        fts: dict[str, list[Hit]] | None = None
        for name, backend in backends.items():
            database = Path(work) / f"index-{chunking}-{name}" / "kairox.db"
            database.parent.mkdir(parents=True, exist_ok=True)
            index, seconds = _index(
                corpus, database, backend, chunking, chunk_tokens, chunk_overlap, sentence_weight
            )
            try:
                if fts is None:
                    fts = {q.id: index.search_words(q.text, K) for q in queries}
                    rows.append(_row(chunking, "fts", fts, splits, chunks=index.chunk_count()))
                vectors = backend.embed([q.text for q in queries])
                vec = {q.id: index.search_vector(vectors[i], K) for i, q in enumerate(queries)}
            finally:
                index.close()
            rows.append(_row(chunking, name, vec, splits, index_s=seconds))
            rows.append(_row(chunking, f"hybrid-{name}", _fused(fts, vec, 1.0), splits))
            grid = {
                str(w): _metrics(_fused(fts, vec, w), splits["train"])["mrr@10"]
                for w in WEIGHT_GRID
            }
            best = max(WEIGHT_GRID, key=lambda w: (grid[str(w)], w))
            tuning[f"{chunking}/{name}"] = {"train_mrr@10": grid, "best_weight": best}
            # The weight tuned here, and the one the embedder ships (kairox search's default).
            shipped = default_fusion_weight(backend)
            tuning[f"{chunking}/{name}"]["shipped_weight"] = shipped
            for weight in sorted({best, shipped} - {1.0}):
                rows.append(
                    _row(chunking, f"hybrid-{name}@{weight}", _fused(fts, vec, weight), splits)
                )
            if progress is not None:
                progress(f"{chunking}/{name}", 1, 1)
    return {
        "benchmark": "code",
        "packages": sorted({q.relpath.split("/")[0] for q in queries}),
        "queries": {split: len(items) for split, items in splits.items()},
        "files": sum(1 for _ in corpus.rglob("*.py")),
        "chunk_tokens": chunk_tokens,
        "chunk_overlap": chunk_overlap,
        "sentence_weight": sentence_weight,
        "systems": rows,
        "weight_tuning": tuning,
        "machine": machine(),
    }


def _row(
    chunking: str,
    system: str,
    ranked: Mapping[str, Sequence[Any]],
    splits: Mapping[str, Sequence[CodeQuery]],
    **extra: Any,
) -> dict[str, Any]:
    row: dict[str, Any] = {"chunking": chunking, "system": system, **extra}
    for split, items in splits.items():
        measured = _metrics(ranked, items)
        prefix = "" if split == "all" else f"{split}_"
        row[f"{prefix}mrr@10"] = measured["mrr@10"]
        row[f"{prefix}recall@10"] = measured["recall@10"]
    return row
