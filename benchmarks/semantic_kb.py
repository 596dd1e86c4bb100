"""SciFact (test split) through one ``sqlite-fts`` knowledge base, words only or with an
``embedding_backend`` (meaning and words fused in the one source).

    python benchmarks/semantic_kb.py DATASET_DIR [none|hashing|minilm ...]

Prints one JSON line per backend: nDCG@10, Recall@100, MRR@10 (ir-measures), the
seconds to fill the knowledge base (embedding included, nothing cached) and the mean
query time over every test query (k = 100).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from kairox.bench.beir import load_beir
from kairox.bench.metrics import score
from kairox.default_plugins import sqlite_fts
from kairox.plugin_host.manager import build_plugin_manager
from kairox.retrieval import Document, Query
from kairox.testing import build_source, run


def measure(dataset_dir: Path, backend: str) -> dict[str, object]:
    dataset = load_beir(dataset_dir, "test")
    registry = build_plugin_manager().registry
    embedder = None if backend == "none" else registry.embedding_backends[backend].factory()
    with tempfile.TemporaryDirectory() as folder:
        options = {"embedding_backend": backend} if embedder is not None else {}
        source = build_source(
            sqlite_fts,
            "sqlite-fts",
            base_dir=folder,
            embedders={backend: embedder} if embedder is not None else None,
            path="kb.db",
            **options,
        )
        documents = [Document(i, text, title=title) for i, (title, text) in dataset.corpus.items()]
        started = time.perf_counter()
        for start in range(0, len(documents), 500):
            source.upsert(documents[start : start + 500])
        source.finish()
        index_seconds = time.perf_counter() - started
        ranked = {}
        started = time.perf_counter()
        for query_id, text in dataset.queries.items():
            ranked[query_id] = [h.id for h in run(source.retrieve(Query(text, k=100)))]
        per_query = (time.perf_counter() - started) / len(dataset.queries)
    return {
        "backend": backend,
        **{name: round(value, 3) for name, value in score(dataset, ranked).items()},
        "index_s": round(index_seconds, 1),
        "query_ms": round(per_query * 1000, 1),
    }


if __name__ == "__main__":
    for name in sys.argv[2:] or ["none", "hashing"]:
        print(json.dumps(measure(Path(sys.argv[1]), name)), flush=True)
