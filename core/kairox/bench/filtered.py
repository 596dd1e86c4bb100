"""The filtered run of ``kairox bench retrieval --filtered``: the same queries with and
without a metadata filter of about 10% selectivity, pushed down into each local engine.

Every document gets a synthetic field ``bucket``: ``crc32(id) % 10``, an integer from 0
to 9 that does not depend on the text, so ``{"bucket": 3}`` keeps about a tenth of the
corpus whatever it holds. Each query is asked unfiltered and filtered with k = 10 (after
one untimed warm-up of each), alternating so that caches favour neither. ``full_k``
counts the filtered queries with at least k matching passages (counted by asking the
same filtered query with k = the corpus size, untimed) that got exactly k hits: a
post-filtering engine would fall short on them.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kairox.bench.beir import BeirDataset
from kairox.bench.report import percentile
from kairox.plugin_host.registry import BuildContext, Registry
from kairox.retrieval import Document, IngestableSource, Query

__all__ = ["BUCKETS", "FILTER", "FILTERED_KINDS", "bucket_of", "filtered_run"]

BUCKETS = 10
#: The filter asked, in the canonical JSON form.
FILTER = {"bucket": 3}
#: The engines the filtered run measures (others are left out of it).
FILTERED_KINDS = ("sqlite-fts", "tantivy")
_OPTIONS = {"sqlite-fts": {"path": "filtered.db"}, "tantivy": {"index_dir": "filtered"}}
K = 10


def bucket_of(doc_id: str) -> int:
    """The synthetic ``bucket`` field of a document."""
    return zlib.crc32(doc_id.encode("utf-8")) % BUCKETS


def _no_backend(name: str) -> Any:
    raise RuntimeError(f"the filtered run builds lexical kinds only, not backend {name!r}")


def _build(kind_name: str, registry: Registry, folder: Path, dataset: BeirDataset) -> Any:
    kind = registry.knowledge_base_kinds[kind_name]
    folder.mkdir(parents=True, exist_ok=True)
    config = kind.config_model(kind=kind_name, **_OPTIONS[kind_name])
    ctx = BuildContext(
        workspace_root=folder, state_dir=folder, base_dir=folder, embedding_backend=_no_backend
    )
    source = kind.factory(kind_name, config, ctx)
    assert isinstance(source, IngestableSource)
    documents = [
        Document(doc_id, text, title=title, metadata={"bucket": bucket_of(doc_id)})
        for doc_id, (title, text) in dataset.corpus.items()
    ]
    for start in range(0, len(documents), 1000):
        source.upsert(documents[start : start + 1000])
    return source


async def _ask_all(
    source: Any, queries: Sequence[str], selected: int
) -> tuple[list[float], list[float], int, int]:
    plain_ms: list[float] = []
    filtered_ms: list[float] = []
    full = eligible = 0
    if queries:  # warm-up, untimed
        await source.retrieve(Query(queries[0], k=K))
        await source.retrieve(Query(queries[0], k=K, filters=FILTER))
    for text in queries:
        started = time.perf_counter()
        await source.retrieve(Query(text, k=K))
        plain_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        hits = await source.retrieve(Query(text, k=K, filters=FILTER))
        filtered_ms.append((time.perf_counter() - started) * 1000)
        everything = await source.retrieve(Query(text, k=max(selected, 1), filters=FILTER))
        if any(bucket_of(hit.id) != FILTER["bucket"] for hit in everything):
            raise AssertionError(f"{source.name}: a hit outside the filter for {text!r}")
        if len(everything) >= K:
            eligible += 1
            full += len(hits) == K
    return plain_ms, filtered_ms, eligible, full


def filtered_run(
    dataset: BeirDataset, kinds: Sequence[str], registry: Registry, scratch: Path
) -> list[dict[str, Any]]:
    """One row per kind: unfiltered and filtered p50/p95, their ratio, and ``full_k``."""
    rows = []
    queries = list(dataset.queries.values())
    selected = sum(1 for doc_id in dataset.corpus if bucket_of(doc_id) == FILTER["bucket"])
    for kind in kinds:
        source = _build(kind, registry, scratch / kind, dataset)
        plain_ms, filtered_ms, eligible, full = asyncio.run(_ask_all(source, queries, selected))
        plain_p50, filtered_p50 = percentile(plain_ms, 50), percentile(filtered_ms, 50)
        rows.append(
            {
                "system": kind,
                "filter": FILTER,
                "selectivity": round(selected / max(len(dataset.corpus), 1), 4),
                "p50_ms": round(plain_p50, 3),
                "p95_ms": round(percentile(plain_ms, 95), 3),
                "filtered_p50_ms": round(filtered_p50, 3),
                "filtered_p95_ms": round(percentile(filtered_ms, 95), 3),
                "filtered_vs_unfiltered_p50": round(filtered_p50 / plain_p50, 2)
                if plain_p50
                else None,
                "queries_with_k_matches": eligible,
                "full_k": full,
            }
        )
        close = getattr(source, "close", None)
        if callable(close):
            close()
    return rows
