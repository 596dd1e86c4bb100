"""A local source beside a remote one: what asking the local one on the loop's thread saves.

    python benchmarks/mixed_profile.py [--dataset SCIFACT] [--size 1000] [--remote-ms 5,20]
        [--queries 300] [--out benchmarks/results/mixed-profile.json]

A sqlite-fts knowledge base of ``--size`` SciFact passages beside a stand-in for a remote
source (a blocking client call of ``--remote-ms`` in a worker thread, as the cloud plugins
make theirs, answering nothing). Each query is asked, rotating which goes first, of: the
composite as it is (the knowledge base on the loop's thread while the remote call runs, once
known to be cheap), the same with ``local_path = False`` (each source in a worker thread of
its own), the remote stand-in alone and the knowledge base alone; all through
``retrieve_sync(Query(text, k=10))``. Prints one JSON line per remote latency (p50s in ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from facade_overhead import interleaved, report, write_rows  # this folder's, beside it

from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.retrieval import CompositeWorkspaceRetriever, Hit, Query, ScoreKind
from kairox.retrieval.documents import Document

SCIFACT = Path(os.environ.get("KAIROX_SCIFACT", "../shared/datasets/scifact"))


class RemoteStandIn:
    """Answers nothing after a blocking call of ``seconds`` in a worker thread."""

    score_kind = ScoreKind.BM25
    filter_support = None

    def __init__(self, seconds: float) -> None:
        self.name = "remote"
        self.seconds = seconds

    def _call(self) -> list[Hit]:
        time.sleep(self.seconds)
        return []

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._call)


def _asker(composite: CompositeWorkspaceRetriever) -> Callable[[str], object]:
    return lambda text: composite.retrieve_sync(Query(text, k=10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=SCIFACT, help="SciFact, BEIR layout")
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--remote-ms", default="5,20")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    corpus = [json.loads(line) for line in (args.dataset / "corpus.jsonl").open()]
    queries = [json.loads(line)["text"] for line in (args.dataset / "queries.jsonl").open()]
    queries = queries[: args.queries]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kairox-mixed-profile-") as folder:
        kb = SqliteFtsSource("kb", Path(folder) / "kb.db")
        kb.upsert([Document(d["_id"], d["text"], title=d["title"]) for d in corpus[: args.size]])
        for remote_ms in [float(ms) for ms in args.remote_ms.split(",")]:
            remote = RemoteStandIn(remote_ms / 1000)
            ways = {
                "mixed": CompositeWorkspaceRetriever([kb, remote], candidates=100),
                "mixed_concurrent": CompositeWorkspaceRetriever([kb, remote], candidates=100),
                "remote_alone": CompositeWorkspaceRetriever([remote], candidates=100),
                "kb_alone": CompositeWorkspaceRetriever([kb], candidates=100),
            }
            ways["mixed_concurrent"].local_path = False
            asks = {name: _asker(composite) for name, composite in ways.items()}
            times = interleaved(asks, queries, warm_ups=2)
            for composite in ways.values():
                composite.close()
            row = {"passages": args.size, "remote_ms": remote_ms, "n": len(queries)}
            row |= {f"{n}_p50_ms": round(statistics.median(t) * 1000, 3) for n, t in times.items()}
            row["loadavg_1m"] = round(os.getloadavg()[0], 2)
            report(rows, row)
    write_rows(rows, args.out)


if __name__ == "__main__":
    main()
