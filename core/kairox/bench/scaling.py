"""``kairox bench scaling``: exact dense search latency as the collection grows.

For each size N, N random unit-length float32 vectors of ``dim`` dimensions are searched
with the same random unit-length queries through:

``floor``
    one numpy matrix-vector product over the matrix (``matrix @ q``): the least any exact
    search must do, the reference every ratio is against;
``top_k``
    :func:`kairox.retrieval.vectors.top_k` on the matrix (product, then partial sort);
``VectorSource``
    :class:`kairox.retrieval.vectors.VectorSource` answering a :class:`Query` that carries
    its vector (as the composite hands it over): a worker thread, ``top_k`` and hits;
``WorkspaceRagIndex``
    :class:`kairox.workspace.rag_index.WorkspaceDenseRetriever` over a real SQLite
    workspace index, sizes up to ``workspace_max`` only: ``top_k`` plus reading the hits'
    chunks back from SQLite. The vectors and chunk rows are written straight into the
    index's tables (embedding N texts is not what is measured); its first query, which
    loads the matrix from SQLite, is reported as ``build_s`` with the writing and not timed.

Each query runs every path in turn, so host noise hits all paths alike; a few warm-up
queries are not timed. The matrix of each size is built once and shared by every path.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench.report import machine, percentile
from kairox.retrieval import Query
from kairox.retrieval.vectors import VectorSource, top_k

PATHS = ("floor", "top_k", "VectorSource", "WorkspaceRagIndex")
WARMUP = 3
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")

Progress = Callable[[str, int, int], None]


def parse_size(text: str) -> int:
    """``"10k"`` -> 10000, ``"1M"`` -> 1000000, ``"2000"`` -> 2000."""
    match = _SIZE.match(str(text))
    if match is None:
        raise ValueError(f"not a size: {text!r} (use a number, optionally with k or M)")
    number, unit = float(match.group(1)), match.group(2).lower()
    value = round(number * {"": 1, "k": 1_000, "m": 1_000_000}[unit])
    if value < 0:
        raise ValueError(f"a size must be >= 0, got {text!r}")
    return value


class RandomBackend:
    """An embedding backend stand-in: the queries arrive embedded, so it never embeds."""

    def __init__(self, dim: int) -> None:
        self.name = f"random-{dim}"
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("the scaling benchmark hands every query its vector")


def unit_vectors(count: int, dim: int, rng: np.random.Generator, block: int = 65_536) -> np.ndarray:
    """``count`` random unit-length float32 rows, normalised in place block by block."""
    matrix = rng.standard_normal((count, dim), dtype=np.float32)
    for start in range(0, count, block):
        part = matrix[start : start + block]
        part /= np.linalg.norm(part, axis=1, keepdims=True)
    return matrix


def fill_workspace_index(database: Path, root: Path, matrix: np.ndarray, backend: Any) -> Any:
    """A ``WorkspaceDenseRetriever`` over an index holding one chunk per row of ``matrix``."""
    from kairox.workspace.rag_index import (
        WorkspaceDenseRetriever,
        WorkspaceRagIndex,
        open_database,
    )

    root.mkdir(parents=True, exist_ok=True)
    index = WorkspaceRagIndex(database, root, backend)
    workspace = index.workspace_id
    per_file = 10
    db = open_database(database)
    try:
        with db:
            for start in range(0, matrix.shape[0], 10_000):
                stop = min(start + 10_000, matrix.shape[0])
                chunks, vectors, files = [], [], []
                for row in range(start, stop):
                    text = f"chunk {row}"
                    digest = hashlib.sha256(text.encode()).hexdigest()
                    relpath = f"file-{row // per_file:07d}.txt"
                    chunks.append(
                        (workspace, relpath, row % per_file, 0, len(text), 2, digest, text)
                    )
                    vectors.append((digest, backend.name, backend.dim, matrix[row].tobytes()))
                    if row % per_file == 0:
                        files.append((workspace, relpath, digest, 10, 0))
                db.executemany("INSERT INTO rag_files VALUES (?, ?, ?, ?, ?)", files)
                db.executemany(
                    'INSERT INTO rag_chunks(workspace, relpath, chunk_index, start, "end", '
                    "token_count, text_hash, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    chunks,
                )
                db.executemany("INSERT INTO rag_embeddings VALUES (?, ?, ?, ?)", vectors)
    finally:
        db.close()
    return WorkspaceDenseRetriever(index)


def _measure_size(
    count: int,
    *,
    dim: int,
    queries: np.ndarray,
    k: int,
    with_workspace: bool,
    rng: np.random.Generator,
    scratch: Path,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    started = time.perf_counter()
    matrix = unit_vectors(count, dim, rng)
    matrix_s = time.perf_counter() - started
    backend = RandomBackend(dim)
    build: dict[str, float | None] = {"floor": None, "top_k": None}

    started = time.perf_counter()
    vector_source = VectorSource(
        "vectors", backend, [str(i) for i in range(count)], [""] * count, matrix
    )
    build["VectorSource"] = time.perf_counter() - started
    workspace = None
    if with_workspace:
        started = time.perf_counter()
        workspace = fill_workspace_index(
            scratch / f"kairox-{count}.db", scratch / f"workspace-{count}", matrix, backend
        )
        workspace.index.search_vector(queries[0], k)  # loads the matrix from SQLite
        build["WorkspaceRagIndex"] = time.perf_counter() - started

    paths = [p for p in PATHS if p != "WorkspaceRagIndex" or workspace is not None]
    latencies: dict[str, list[float]] = {path: [] for path in paths}
    answers: dict[str, list[list[int]]] = {path: [] for path in paths if path != "floor"}

    async def run_all() -> None:
        total = len(queries) + WARMUP
        for number in range(total):
            vector = queries[number % len(queries)]
            timed = number >= WARMUP
            query = Query("random", k=k, embeddings={backend.name: vector})

            began = time.perf_counter()
            _ = matrix @ vector
            spent = time.perf_counter() - began
            if timed:
                latencies["floor"].append(spent * 1000)

            began = time.perf_counter()
            rows, _ = top_k(matrix, vector, k)
            spent = time.perf_counter() - began
            if timed:
                latencies["top_k"].append(spent * 1000)
                answers["top_k"].append(rows.tolist())

            began = time.perf_counter()
            hits = await vector_source.retrieve(query)
            spent = time.perf_counter() - began
            if timed:
                latencies["VectorSource"].append(spent * 1000)
                answers["VectorSource"].append([int(h.id) for h in hits])

            if workspace is not None:
                began = time.perf_counter()
                hits = await workspace.retrieve(query)
                spent = time.perf_counter() - began
                if timed:
                    latencies["WorkspaceRagIndex"].append(spent * 1000)
                    # chunk ids: file-NNNNNNN.txt#i -> the row it was written from
                    answers["WorkspaceRagIndex"].append(
                        [int(h.id[5:12]) * 10 + int(h.id.split("#")[1]) for h in hits]
                    )
            if progress is not None:
                progress(f"searching {count:,} vectors", number + 1, total)

    asyncio.run(run_all())
    if workspace is not None:
        workspace.index.close()
    # Every path must find the same rows, or the comparison means nothing.
    agree = all(a == answers["top_k"] for a in answers.values())
    floor_p50 = percentile(latencies["floor"], 50)
    floor_p95 = percentile(latencies["floor"], 95)
    rows_out = []
    for path in paths:
        p50, p95 = percentile(latencies[path], 50), percentile(latencies[path], 95)
        rows_out.append(
            {
                "vectors": count,
                "path": path,
                "p50_ms": round(p50, 4),
                "p95_ms": round(p95, 4),
                "ratio_p50": round(p50 / floor_p50, 3) if floor_p50 else None,
                "ratio_p95": round(p95 / floor_p95, 3) if floor_p95 else None,
                "qps": round(1000 / float(np.mean(latencies[path])), 1),
                "build_s": None if build.get(path) is None else round(build[path] or 0.0, 3),
                "matrix_mb": round(matrix.nbytes / 2**20, 1),
                "matrix_s": round(matrix_s, 3),
                "same_results_as_top_k": agree,
            }
        )
    return rows_out


def benchmark(
    sizes: Sequence[int],
    *,
    dim: int = 384,
    queries: int = 100,
    k: int = 10,
    workspace_max: int = 100_000,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Latency of every path at every size; returns the report written by ``--out``."""

    rng = np.random.default_rng(seed)
    query_vectors = unit_vectors(max(1, queries), dim, rng)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kairox-scaling-") as scratch:
        for count in sizes:
            if count < 1:
                raise ValueError(f"a size must be >= 1, got {count}")
            results.extend(
                _measure_size(
                    count,
                    dim=dim,
                    queries=query_vectors,
                    k=k,
                    with_workspace=count <= workspace_max,
                    rng=rng,
                    scratch=Path(scratch),
                    progress=progress,
                )
            )
    return {
        "benchmark": "dense-scaling",
        "dim": dim,
        "queries": queries,
        "warmup": WARMUP,
        "k": k,
        "sizes": list(sizes),
        "workspace_max": workspace_max,
        "seed": seed,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "blas": _blas()},
        "results": results,
    }


def _blas() -> str | None:
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:
        return None
