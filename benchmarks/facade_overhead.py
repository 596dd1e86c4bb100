"""What `kairox.open().search` pays on top of the engine: interleaved p50s, quiet or under load.

    python benchmarks/facade_overhead.py [--dataset SCIFACT] [--sizes 1000,10000] [--rounds 3]
        [--queries N] [--load 8]
        [--out benchmarks/results/facade-overhead.json]

For each size, builds a sqlite-fts knowledge base of that many SciFact passages (repeats
get a distinct suffix) in a temporary workspace, then asks every SciFact query twice per
round: once of the engine as `kairox bench` times it (``await source.retrieve(Query(text,
k=100))`` on a kept event loop) and once through ``kairox.open(workspace).search(text,
k=10)`` (which asks the source for the same 100 candidates), alternating which goes first.
``--load N`` runs N busy Python processes for the duration of the timings (ended after).
Prints one JSON line per size and writes them all to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kairox
from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.retrieval import Query

#: Where SciFact (BEIR layout) is read from unless --dataset says otherwise.
SCIFACT = Path(os.environ.get("KAIROX_SCIFACT", "../shared/datasets/scifact"))
CONFIG = '[knowledge_bases.docs]\nkind = "sqlite-fts"\npath = "docs.db"\n'


def build(workspace: Path, size: int, dataset: Path) -> None:
    """A workspace whose one knowledge base holds ``size`` passages."""
    corpus = [json.loads(line) for line in (dataset / "corpus.jsonl").open()]
    (workspace / "kairox.toml").write_text(CONFIG)
    records = workspace / "docs.jsonl"
    with records.open("w") as out:
        for number in range(size):
            passage = corpus[number % len(corpus)]
            repeat = number // len(corpus)
            text = passage["text"] + (f" variant{repeat}" if repeat else "")
            record = {"id": f"{passage['_id']}-{repeat}", "title": passage["title"], "text": text}
            out.write(json.dumps(record) + "\n")
    with kairox.open(workspace) as kx:
        kx.facade.ingest("docs", [records], chunk=False)


def measure(workspace: Path, queries: list[str], rounds: int) -> dict[str, float]:
    engine = SqliteFtsSource("docs", workspace / "docs.db")
    loop = asyncio.new_event_loop()

    async def engine_seconds(text: str) -> float:
        started = time.perf_counter()
        await engine.retrieve(Query(text, k=100))
        return time.perf_counter() - started

    def search_seconds(text: str) -> float:
        started = time.perf_counter()
        kx.search(text, k=10)
        return time.perf_counter() - started

    engine_times: list[float] = []
    search_times: list[float] = []
    with kairox.open(workspace) as kx:
        kx.search(queries[0], k=10)  # warm-up, untimed: opens the index, plans the profile
        loop.run_until_complete(engine_seconds(queries[0]))
        for round_number in range(rounds):
            for number, text in enumerate(queries):
                if (number + round_number) % 2:
                    engine_times.append(loop.run_until_complete(engine_seconds(text)))
                    search_times.append(search_seconds(text))
                else:
                    search_times.append(search_seconds(text))
                    engine_times.append(loop.run_until_complete(engine_seconds(text)))
    loop.close()
    engine_ms = statistics.median(engine_times) * 1000
    search_ms = statistics.median(search_times) * 1000
    return {
        "n": len(engine_times),
        "engine_p50_ms": round(engine_ms, 3),
        "open_search_p50_ms": round(search_ms, 3),
        "ratio": round(search_ms / engine_ms, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=None, help="the first N queries only")
    parser.add_argument("--load", type=int, default=0, help="busy processes while timing")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--dataset", type=Path, default=SCIFACT, help="SciFact, BEIR layout")
    args = parser.parse_args()
    queries = [json.loads(line)["text"] for line in (args.dataset / "queries.jsonl").open()]
    queries = queries[: args.queries]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kairox-facade-overhead-") as folder:
        os.environ["KAIROX_HOME"] = str(Path(folder) / "home")
        for size in [int(s) for s in args.sizes.split(",")]:
            workspace = Path(folder) / f"kb{size}"
            workspace.mkdir()
            build(workspace, size, args.dataset)
            busy = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.load)
            ]
            try:
                row = {"passages": size, "busy_processes": args.load}
                row |= measure(workspace, queries, args.rounds)
                row["loadavg_1m"] = round(os.getloadavg()[0], 2)
            finally:
                for process in busy:
                    process.kill()
                    process.wait()
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
