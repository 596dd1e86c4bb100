"""``kairox bench scale``: a knowledge base at growing sizes against bm25s.

For each size N a synthetic corpus of N distinct passages is built from a BEIR corpus
(:mod:`kairox.bench.scale_corpus`). Then, each in a child process whose CPU time and
peak resident set are read from the operating system when it ends:

``kb, words``
    ``kairox kb ingest --no-chunk`` into a fresh ``sqlite-fts`` knowledge base, exactly
    as a user runs it;
``kb, words + vectors``
    the same with ``embedding_backend`` set (``--vectors``: the default's hashing vectors,
    or with ``--embedder minilm-cached`` MiniLM's, precomputed for the source corpus and
    given to each perturbed copy with a little noise: :mod:`kairox.bench.cached_embedder`,
    so that a million passages are measured without hours of embedding);
``bm25s``
    bm25s indexing the same passages and saving its index
    (:mod:`kairox.bench.scale_peer`).

With vectors and numkong installed, the approximate indexes are measured on the knowledge
base's vectors too, passages and sentences (:mod:`kairox.bench.scale_ann`): build time,
p50 against exact search, recall@k against exact, for the linear scan and for the
partitioned index at several numbers of probed clusters.

Each system's size on disk is what its files take. The searches load the knowledge base
and bm25s's saved index in this process and run query by query, interleaved, so that
host noise hits both alike; a few warm-up queries are not timed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kairox.bench import BenchError
from kairox.bench.cached_embedder import CACHE_ENV, STATS_FILE, CachedEmbedder
from kairox.bench.report import created_now, machine, percentile
from kairox.bench.scale_ann import measure_ann
from kairox.bench.scale_corpus import source_passages, write_corpus
from kairox.bench.scale_peer import SavedBm25s
from kairox.bench.scale_vectors import cache_file, embed_source
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.retrieval import Query
from kairox.retrieval.ann import NUMKONG

WARMUP = 3
#: The embedding backend ``--vectors`` configures (the default's).
VECTOR_BACKEND = "hashing"
#: The backends ``--embedder`` may name.
EMBEDDERS = (VECTOR_BACKEND, "minilm-cached")

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ChildRun:
    """What one child process cost: CPU (user + system), wall time, peak resident set."""

    cpu_s: float
    wall_s: float
    peak_rss_mb: float
    stdout: str


# Runs a module as ``python -m`` would, writing its own peak resident set (VmHWM) to a
# file at exit: Linux's ru_maxrss of an exec'd child starts from its parent's resident
# set at the fork (here, this process with bm25s loaded), so it cannot be used.
_PEAK_FILE = "KAIROX_BENCH_PEAK_FILE"
_REPORTS_PEAK = f"""
import atexit, os, runpy, sys

def _peak():
    with open("/proc/self/status") as status, open(os.environ["{_PEAK_FILE}"], "w") as out:
        out.write(next((line.split()[1] for line in status if line.startswith("VmHWM:")), ""))

atexit.register(_peak)
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def python_module(module: str, *args: str) -> list[str]:
    """The command running ``python -m module args`` that reports its own peak memory."""
    return [sys.executable, "-c", _REPORTS_PEAK, module, *args]


def run_child(argv: Sequence[str], *, cwd: Path, env: dict[str, str]) -> ChildRun:
    """Run ``argv`` to its end and read its resource usage (``wait4``); the peak resident
    set is the one a :func:`python_module` child reports, else ``ru_maxrss``. A failure is
    a :class:`BenchError` carrying the end of its stderr."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r", suffix=".peak") as peak,
    ):
        started = time.perf_counter()
        env = {**env, _PEAK_FILE: peak.name}
        process = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            tail = err.read().decode(errors="replace")[-2000:]
            raise BenchError(f"{' '.join(argv[:4])}... failed ({process.returncode}): {tail}")
        reported = peak.read().strip()
        return ChildRun(
            cpu_s=usage.ru_utime + usage.ru_stime,
            wall_s=wall,
            # Both in KiB on Linux.
            peak_rss_mb=(int(reported) if reported else usage.ru_maxrss) / 1024,
            stdout=out.read().decode(),
        )


def _disk_bytes(*paths: Path) -> int:
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        elif path.exists():
            total += path.stat().st_size
    return total


def _child_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    # A private state folder and no user config or external plugins: only what is measured.
    env.update(
        KAIROX_HOME=str(home / "state"),
        XDG_CONFIG_HOME=str(home / "config"),
        KAIROX_LOAD_PLUGINS="",
    )
    return env


def ingest_kb(
    corpus: Path,
    folder: Path,
    *,
    vectors: bool,
    settings: Mapping[str, Any] | None = None,
    vector_cache: Path | None = None,
) -> tuple[ChildRun, SqliteFtsSource]:
    """``kairox kb ingest`` of ``corpus`` into a new knowledge base in ``folder`` (with
    vectors, ``settings`` are more of its ``sqlite-fts`` settings; with ``vector_cache``,
    the vectors are ``minilm-cached`` ones from that cache, else hashing ones)."""
    folder.mkdir(parents=True)
    settings = dict(settings or {}) if vectors else {}
    backend = VECTOR_BACKEND if vector_cache is None else EMBEDDERS[1]
    lines = [f'embedding_backend = "{backend}"'] if vectors else []
    # JSON strings and numbers are TOML ones too.
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (folder / "kairox.toml").write_text(
        '[knowledge_bases.scale]\nkind = "sqlite-fts"\npath = "kb.db"\n' + "\n".join(lines) + "\n"
    )
    env = _child_env(folder)
    module = "kairox"
    if vectors and vector_cache is not None:
        # The CLI with the cached backend registered (a bench-only backend).
        module, env[CACHE_ENV] = "kairox.bench.scale_child", str(vector_cache)
    argv = python_module(module, "kb", "ingest", "scale", str(corpus), "--no-chunk", "--json")
    ran = run_child(argv, cwd=folder, env=env)
    embedder: HashingEmbedder | CachedEmbedder | None = None
    if vectors:
        embedder = HashingEmbedder() if vector_cache is None else CachedEmbedder(vector_cache)
    return ran, SqliteFtsSource("scale", folder / "kb.db", embedder=embedder, **settings)


def _search_all(
    source: SqliteFtsSource,
    peer: SavedBm25s,
    queries: Sequence[str],
    k: int,
    progress: Progress | None,
    what: str,
) -> tuple[list[float], list[float]]:
    """Milliseconds per query of the knowledge base and of bm25s, interleaved."""
    ours: list[float] = []
    theirs: list[float] = []

    async def run_all() -> None:
        total = len(queries) + WARMUP
        for number in range(total):
            text = queries[number % len(queries)]
            began = time.perf_counter()
            await source.retrieve(Query(text, k=k))
            spent = time.perf_counter() - began
            began = time.perf_counter()
            peer.search(text, k)
            peer_spent = time.perf_counter() - began
            if number >= WARMUP:
                ours.append(spent * 1000)
                theirs.append(peer_spent * 1000)
            if progress is not None:
                progress(what, number + 1, total)

    asyncio.run(run_all())
    return ours, theirs


def _queries(source: Path, count: int) -> list[str]:
    file = source / "queries.jsonl" if source.is_dir() else source.with_name("queries.jsonl")
    if not file.is_file():
        raise BenchError(f"{file} is missing: the searches use the source's queries")
    texts = []
    with file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and len(texts) < count:
                texts.append(json.loads(line)["text"])
    return texts


def _row(size: int, system: str, ran: ChildRun, disk: int, text: int) -> dict[str, Any]:
    return {
        "passages": size,
        "system": system,
        "ingest_cpu_s": round(ran.cpu_s, 2),
        "ingest_wall_s": round(ran.wall_s, 2),
        "peak_rss_mb": round(ran.peak_rss_mb, 1),
        "disk_mb": round(disk / 2**20, 1),
        "disk_bytes": disk,
        "text_bytes": text,
        "disk_per_text": round(disk / text, 2) if text else None,
        "search_p50_ms": None,
        "search_p95_ms": None,
        "bm25s_p50_ms": None,
        "ratio_to_bm25s": None,
    }


def _timed(row: dict[str, Any], ms: Sequence[float], peer_ms: Sequence[float]) -> None:
    p50, peer_p50 = percentile(ms, 50), percentile(peer_ms, 50)
    row.update(
        search_p50_ms=round(p50, 3),
        search_p95_ms=round(percentile(ms, 95), 3),
        bm25s_p50_ms=round(peer_p50, 3),
        ratio_to_bm25s=round(p50 / peer_p50, 2) if peer_p50 else None,
    )


def _measure_size(
    size: int,
    passages: list[tuple[str, str, str]],
    queries: Sequence[str],
    *,
    vectors: bool,
    k: int,
    scratch: Path,
    progress: Progress | None,
    vector_config: Mapping[str, Any] | None = None,
    vector_cache: Path | None = None,
) -> list[dict[str, Any]]:
    folder = scratch / f"n{size}"
    folder.mkdir()
    corpus = folder / "corpus.jsonl"
    text = write_corpus(passages, size, corpus)
    peer_folder = folder / "bm25s"
    peer_run = run_child(
        python_module("kairox.bench.scale_peer", str(corpus), str(peer_folder)),
        cwd=folder,
        env=_child_env(folder),
    )
    peer = SavedBm25s(peer_folder)
    rows = [_row(size, "bm25s", peer_run, _disk_bytes(peer_folder), text)]
    label = f"kb, words + {VECTOR_BACKEND if vector_cache is None else EMBEDDERS[1]}"
    if vector_config:
        label += " (" + ", ".join(f"{k} {v}" for k, v in vector_config.items()) + ")"
    systems = [("kb, words", False)] + ([(label, True)] if vectors else [])
    for system, with_vectors in systems:
        if progress is not None:
            progress(f"ingesting {size:,} passages ({system})", 0, 1)
        kb_folder = folder / ("kb-vectors" if with_vectors else "kb-words")
        ran, source = ingest_kb(
            corpus,
            kb_folder,
            vectors=with_vectors,
            settings=vector_config,
            vector_cache=vector_cache,
        )
        disk = _disk_bytes(*kb_folder.glob("kb.db*"))
        row = _row(size, system, ran, disk, text)
        row["written"] = json.loads(ran.stdout)["chunks_written"]
        what = f"searching {size:,} passages ({system})"
        ours, theirs = _search_all(source, peer, queries, k, progress, what)
        _timed(row, ours, theirs)
        embedder = source.embedder
        del source  # its connection and search arrays go, before the next measurement's
        if with_vectors and embedder is not None and NUMKONG.available():
            weight = (vector_config or {}).get("sentence_weight")
            options = {} if weight is None else {"sentence_weight": float(weight)}
            row.update(measure_ann(kb_folder / "kb.db", embedder, queries, k, **options))
        stats = kb_folder / STATS_FILE
        if with_vectors and stats.is_file():  # how many texts had no source vector
            row.update(json.loads(stats.read_text()))
        rows.append(row)
    rows[0]["search_p50_ms"] = rows[1]["bm25s_p50_ms"]
    return rows


def benchmark(
    source: Path,
    sizes: Sequence[int],
    *,
    vectors: bool = False,
    vector_config: Mapping[str, Any] | None = None,
    queries: int = 100,
    k: int = 10,
    scratch: Path | None = None,
    progress: Progress | None = None,
    embedder: str = VECTOR_BACKEND,
    vector_cache: Path | None = None,
) -> dict[str, Any]:
    """Every system at every size; returns the report written by ``--out``. With
    ``embedder`` ``minilm-cached``, the source's texts are embedded first (once: cached
    in ``vector_cache``, by default the user's cache folder)."""
    if any(size < 1 for size in sizes):
        raise BenchError(f"every size must be at least 1, got {list(sizes)}")
    if embedder not in EMBEDDERS:
        raise BenchError(f"--embedder must be one of {', '.join(EMBEDDERS)}, not {embedder!r}")
    cache = None
    if vectors and embedder != VECTOR_BACKEND:
        folder = vector_cache or Path.home() / ".cache" / "kairox" / "bench"
        if progress is not None:
            progress("embedding the source's texts (once, then cached)", 0, 1)
        cache = embed_source(source, cache_file(folder, source))
    passages = source_passages(source)
    texts = _queries(source, queries)
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kairox-scale-", dir=scratch) as folder:
        for size in sizes:
            results.extend(
                _measure_size(
                    size,
                    passages,
                    texts,
                    vectors=vectors,
                    vector_config=vector_config,
                    k=k,
                    scratch=Path(folder),
                    progress=progress,
                    vector_cache=cache,
                )
            )
    return {
        "benchmark": "scale",
        "source": str(source),
        "source_passages": len(passages),
        "sizes": list(sizes),
        "queries": len(texts),
        "warmup": WARMUP,
        "k": k,
        "vector_config": dict(vector_config or {}),
        "embedder": embedder if vectors else None,
        "created": created_now(),
        "machine": machine(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "results": results,
    }
