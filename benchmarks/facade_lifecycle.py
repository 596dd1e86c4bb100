"""Warm `kairox search` and a chat turn's retrieval through one facade: p50 wall and CPU time.

    python benchmarks/facade_lifecycle.py WORKSPACE STATE_DIR

indexes WORKSPACE (state in STATE_DIR), then times 50 searches after a first one in the
same facade (what a resident process, the TUI or a session pays per search) and 20 chat
turns after a first one, with a scripted model (the retrieval part is the facade's search
the turn awaits). Prints one JSON line. Run it with ``PYTHONPATH=<other checkout>/core`` to
time another version of the code on the same workspace; alternate the two, the host is noisy.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from kairox.default_plugins.scripted_model import ScriptedModel
from kairox.runtime.facade import AppFacade
from kairox.runtime.session import Session

QUERIES = [
    "how does a plugin register a knowledge base kind",
    "token budget of the assembler",
    "memory approval flow",
    "compaction summary provenance",
    "reciprocal rank fusion",
    "sqlite connection busy timeout",
    "workspace index vector pack",
    "marker extractor chunk boundary",
    "retry with backoff",
    "profile aliases",
    "event store append only",
    "config check matrix",
]


class TimedFacade(AppFacade):
    """Times every search, whichever of the two a caller uses."""

    timings: list[float]

    async def search(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return await super().search(*args, **kwargs)
        finally:
            self.timings.append(time.perf_counter() - started)

    def search_sync(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return super().search_sync(*args, **kwargs)
        finally:
            self.timings.append(time.perf_counter() - started)


def ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


def main(workspace: Path, state_dir: Path) -> dict[str, float]:
    facade = TimedFacade(cwd=workspace, state_dir=state_dir)
    facade.timings = []
    facade.index_workspace()
    wall, cpu = [], []
    for number in range(51):
        started, used = time.perf_counter(), time.process_time()
        facade.search_sync(QUERIES[number % len(QUERIES)], k=10)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)

    async def chat() -> list[float]:
        turns = []
        async with Session(facade, backend=ScriptedModel(["ok, noted."] * 25)) as session:
            for number in range(21):
                started = time.perf_counter()
                await session.turn(QUERIES[number % len(QUERIES)])
                turns.append(time.perf_counter() - started)
        return turns

    facade.timings = []
    turns = asyncio.run(chat())
    return {
        "search_first_ms": round(wall[0] * 1000, 2),
        "search_warm_p50_ms": ms(wall[1:]),
        "search_warm_cpu_p50_ms": ms(cpu[1:]),
        "turn_retrieval_p50_ms": ms(facade.timings[1:]),
        "turn_p50_ms": ms(turns[1:]),
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
