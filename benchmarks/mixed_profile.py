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
from pathlib import Path

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
            times: dict[str, list[float]] = {name: [] for name in ways}
            for composite in ways.values():  # warm-up, untimed; learns the local cost
                for _ in range(2):
                    composite.retrieve_sync(Query(queries[0], k=10))
            order = list(ways)
            for number, text in enumerate(queries):
                shift = number % len(order)
                for name in order[shift:] + order[:shift]:
                    started = time.perf_counter()
                    ways[name].retrieve_sync(Query(text, k=10))
                    times[name].append(time.perf_counter() - started)
            for composite in ways.values():
                composite.close()
            row = {"passages": args.size, "remote_ms": remote_ms, "n": len(queries)}
            row |= {f"{n}_p50_ms": round(statistics.median(t) * 1000, 3) for n, t in times.items()}
            row["loadavg_1m"] = round(os.getloadavg()[0], 2)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
