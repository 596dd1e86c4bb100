"""Where a SciFact query's CPU goes in the ``tantivy`` source, against ``bm25s``'s whole query.

Builds both over the corpus (the tantivy index in a temporary folder, 1,000 documents a
commit then ``finish()``, as ``kairox bench retrieval``
fills it), then runs the test queries (top 100)
through each part alone, several passes, and prints the median over passes of the mean
CPU time per query (``time.thread_time``: what this thread spent, not the wall clock):

    python benchmarks/tantivy_parts.py [--dataset /work/shared/datasets/scifact] [--passes 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kairox_tantivy import TantivySource

from kairox.bench.beir import load_beir
from kairox.bench.peers import Bm25sSource
from kairox.retrieval import Document, Hit, Query

K = 100


def cpu_per_query(run: Callable[[str], object], texts: list[str], passes: int) -> float:
    """Median over ``passes`` of the mean CPU microseconds ``run`` takes per text."""
    means = []
    for _ in range(passes):
        started = time.thread_time()
        for text in texts:
            run(text)
        means.append((time.thread_time() - started) / len(texts) * 1e6)
    return statistics.median(means)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("/work/shared/datasets/scifact"))
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    data = load_beir(args.dataset)
    texts = list(data.queries.values())
    docs = [Document(i, text, title=title) for i, (title, text) in data.corpus.items()]

    with tempfile.TemporaryDirectory() as scratch:
        source = TantivySource("tantivy", Path(scratch) / "index")
        for start in range(0, len(docs), 1000):
            source.upsert(docs[start : start + 1000])
        source.finish()  # as `kairox kb ingest` and `kairox bench retrieval` end
        index = source._open()
        searcher = index._searcher()
        boosts = {"title_boost": source.title_boost, "body_boost": source.body_boost}
        fields = [("title", source.title_boost), ("body", source.body_boost)]
        Occur, TQuery = index._tantivy.Occur, index._tantivy.Query

        def build(text: str) -> object:
            return TQuery.boolean_query(
                [
                    (Occur.Should, index._clause(f, t, b))
                    for t in index.query_terms(text)
                    for f, b in fields
                ]
            )

        built = {text: build(text) for text in texts}
        found = {text: searcher.search(built[text], limit=K, count=False).hits for text in texts}
        keys = {
            text: searcher.fast_field_values("key", [a for _s, a in hits])
            for text, hits in found.items()
        }
        rows = {text: index._store.hits(keys[text]) for text in texts}
        peer = Bm25sSource(
            "bm25s", list(data.corpus), [f"{t}\n{x}".strip() for t, x in data.corpus.values()]
        )
        parts = {
            "bm25s whole query (for scale)": lambda t: peer.search(Query(t, k=K)),
            "tantivy: analyse + build the boolean query": build,
            "tantivy: the engine's search, top 100 (count=False)": lambda t: searcher.search(
                built[t], limit=K, count=False
            ),
            "tantivy: the same search and its `.hits` (100 (score, address) pairs)": lambda t: (
                searcher.search(built[t], limit=K, count=False).hits
            ),
            "tantivy: the 100 keys (`fast_field_values`)": lambda t: searcher.fast_field_values(
                "key", [a for _s, a in found[t]]
            ),
            "tantivy: the 100 rows from documents.sqlite": lambda t: index._store.hits(keys[t]),
            "tantivy: the 100 rows from documents.sqlite, none kept in memory": lambda t: (
                index._store._read(keys[t])
            ),
            "tantivy: `TantivyIndex.search_stored` (all of the above, rows in memory)": lambda t: (
                index.search_stored(t, K, **boosts)
            ),
            "tantivy: `TantivyIndex.search_rows` (all of the above)": lambda t: index.search_rows(
                t, K, **boosts
            ),
            "100 `Hit` objects alone (both sources build them)": lambda t: [
                Hit(row[0], row[2], 1.0, "tantivy", row[3], {}) for row in rows[t]
            ],
            "tantivy: whole `TantivySource._search` (plus the `Hit`s)": lambda t: source._search(
                Query(t, k=K)
            ),
        }
        print(f"{len(texts)} queries, {len(docs)} documents, {searcher.num_segments} segments")
        print("| part | CPU us/query |\n|---|---|")
        for name, run in parts.items():
            print(f"| {name} | {cpu_per_query(run, texts, args.passes):,.0f} |")


if __name__ == "__main__":
    main()
