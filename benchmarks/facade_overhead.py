"""What `kairox.open().search` pays on top of the engine: interleaved p50s, quiet or under load.

    python benchmarks/facade_overhead.py [--dataset SCIFACT] [--sizes 1000,10000] [--rounds 3]
        [--kbs 1] [--queries N] [--load 8]
        [--out benchmarks/results/facade-overhead.json]

For each size, builds ``--kbs`` sqlite-fts knowledge bases of that many SciFact passages
each (repeats get a distinct suffix; the second base starts where the first ends) in a
temporary workspace whose default profile sees them all, then asks every SciFact query of
every way below once per round, rotating which goes first:

* ``engine``: the engine as `kairox bench` times it, on a kept event loop: ``await
  source.retrieve(Query(text, k=100))`` for one base, ``await composite.retrieve(...)``
  over the bases' sources (a composite with 100 candidates each, fusing their rankings
  as the facade's does) for several;
* ``engine_concurrent`` (several bases): that composite asking its sources concurrently in
  worker threads (``local_path = False``), as it did before sources that all answer
  locally were asked in turn;
* ``engine_sync`` (several bases): that composite's ``retrieve_sync`` (in turn in the
  calling thread, no event loop: the engine with nothing of the facade around it);
* ``open_search``: ``kairox.open(workspace).search(text, k=10)`` (which asks each source
  for the same 100 candidates);
* ``open_asearch``: ``await kx.asearch(text, k=10)`` on a kept event loop;
* ``open_search_concurrent`` (several bases): ``search`` with the profile's composite
  asking concurrently.

Every way has sources (and a composite) of its own, as each ``kairox.open`` handle has:
a source keeps what it learnt of the terms of the queries it was asked (their row
counts), so a way sharing sources with another found each query's counts already there
when it came second (the engine's three ways shared theirs until 2026-12-05), and ways
sharing a composite shared its judgement of whether to ask in turn.

``--load N`` runs N busy Python processes for the duration of the timings (ended after).
Prints one JSON line per size (p50s in ms, each way's ratio to ``engine``, and with several
bases ``open_search``'s to ``engine_sync``, the same synchronous path without the facade)
and writes them all to ``--out``.
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import kairox
from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.retrieval import CompositeWorkspaceRetriever, Query

#: Where SciFact (BEIR layout) is read from unless --dataset says otherwise.
SCIFACT = Path(os.environ.get("KAIROX_SCIFACT", "../shared/datasets/scifact"))


def config(bases: int) -> str:
    """A kairox.toml with ``bases`` sqlite-fts knowledge bases (``kb0.db``, ``kb1.db``...)."""
    return "".join(
        f'[knowledge_bases.kb{number}]\nkind = "sqlite-fts"\npath = "kb{number}.db"\n'
        for number in range(bases)
    )


def build(workspace: Path, size: int, bases: int, dataset: Path) -> None:
    """A workspace with ``bases`` knowledge bases of ``size`` passages each."""
    corpus = [json.loads(line) for line in (dataset / "corpus.jsonl").open()]
    (workspace / "kairox.toml").write_text(config(bases))
    with kairox.open(workspace) as kx:
        for base in range(bases):
            records = workspace / f"kb{base}.jsonl"
            with records.open("w") as out:
                for number in range(base * size, (base + 1) * size):
                    passage = corpus[number % len(corpus)]
                    repeat = number // len(corpus)
                    text = passage["text"] + (f" variant{repeat}" if repeat else "")
                    record = {
                        "id": f"{passage['_id']}-{repeat}",
                        "title": passage["title"],
                        "text": text,
                    }
                    out.write(json.dumps(record) + "\n")
            kx.facade.ingest(f"kb{base}", [records], chunk=False)


def interleaved(
    ways: dict[str, Callable[[str], Any]], queries: list[str], rounds: int = 1, warm_ups: int = 1
) -> dict[str, list[float]]:
    """Seconds each way took for each query, the ways asked in a rotating order so host
    noise hits all alike, after ``warm_ups`` untimed askings of each (which open the
    indexes, plan the profile and learn the local sources' cost)."""
    for ask in ways.values():
        for _ in range(warm_ups):
            ask(queries[0])
    times: dict[str, list[float]] = {name: [] for name in ways}
    order = list(ways)
    for round_number in range(rounds):
        for number, text in enumerate(queries):
            shift = (number + round_number) % len(order)
            for name in order[shift:] + order[:shift]:
                started = time.perf_counter()
                ways[name](text)
                times[name].append(time.perf_counter() - started)
    return times


def report(rows: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """Print ``row`` as one JSON line and keep it for :func:`write_rows`."""
    print(json.dumps(row), flush=True)
    rows.append(row)


def write_rows(rows: list[dict[str, Any]], out: Path | None) -> None:
    if out is not None:
        out.write_text(json.dumps(rows, indent=2) + "\n")


def measure(workspace: Path, bases: int, queries: list[str], rounds: int) -> dict[str, Any]:
    def sources() -> list[SqliteFtsSource]:
        return [SqliteFtsSource(f"kb{n}", workspace / f"kb{n}.db") for n in range(bases)]

    # One each for engine, engine_concurrent and engine_sync: see the module's docstring.
    composites = [
        CompositeWorkspaceRetriever(sources(), default_timeout_ms=600_000, candidates=100)
        for _ in range(3)
    ]
    composites[1].local_path = False
    loop = asyncio.new_event_loop()

    def on_loop(make: Callable[[str], Awaitable[Any]]) -> Callable[[str], Any]:
        return lambda text: loop.run_until_complete(make(text))

    kx = kairox.open(workspace)
    concurrent_kx = kairox.open(workspace)
    concurrent_kx.facade.sources.composite(concurrent_kx.profile).local_path = False
    ways: dict[str, Callable[[str], Any]] = {
        "open_search": lambda text: kx.search(text, k=10),
        "open_asearch": on_loop(lambda text: kx.asearch(text, k=10)),
    }
    if bases == 1:
        source = sources()[0]
        ways["engine"] = on_loop(lambda text: source.retrieve(Query(text, k=100)))
    else:
        ways["engine"] = on_loop(lambda text: composites[0].retrieve(Query(text, k=100)))
        ways["engine_concurrent"] = on_loop(lambda text: composites[1].retrieve(Query(text, k=100)))
        ways["engine_sync"] = lambda text: composites[2].retrieve_sync(Query(text, k=100))
        ways["open_search_concurrent"] = lambda text: concurrent_kx.search(text, k=10)
    try:
        times = interleaved(ways, queries, rounds)
    finally:
        loop.close()
        kx.close()
        concurrent_kx.close()
        for composite in composites:
            composite.close()
    p50 = {name: statistics.median(seconds) * 1000 for name, seconds in times.items()}
    row: dict[str, Any] = {"n": len(times["engine"])}
    row |= {f"{name}_p50_ms": round(ms, 3) for name, ms in p50.items()}
    row |= {
        f"{name}_ratio": round(ms / p50["engine"], 3)
        for name, ms in p50.items()
        if name != "engine"
    }
    if "engine_sync" in p50:
        row["open_search_vs_engine_sync_ratio"] = round(p50["open_search"] / p50["engine_sync"], 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kbs", type=int, default=1, help="knowledge bases in the profile")
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
            build(workspace, size, args.kbs, args.dataset)
            busy = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.load)
            ]
            try:
                row = {"passages": size, "knowledge_bases": args.kbs, "busy_processes": args.load}
                row |= measure(workspace, args.kbs, queries, args.rounds)
                row["loadavg_1m"] = round(os.getloadavg()[0], 2)
            finally:
                for process in busy:
                    process.kill()
                    process.wait()
            report(rows, row)
    write_rows(rows, args.out)


if __name__ == "__main__":
    main()
