"""What recall adds to a warm chat turn, on an archive of N messages: interleaved medians.

    python benchmarks/recall_latency.py [MESSAGES] [TURNS]

fills a fresh workspace's archive with MESSAGES messages (default 5,000: 50 earlier
sessions of 100, speakers and times, words drawn from a 3,000-word vocabulary), indexes
them (not timed), then times TURNS pairs of chat turns (default 40) in one new session with
a scripted model, one with recall (``[recall] sessions = "workspace"``, the default) and one
without (``"none"``), alternating which goes first. Both facades share the state and the
workspace index (two small files), so the only difference is recall. Prints one JSON line:
p50/p95 of each and of the per-pair difference, the archive size and the machine load.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kairox.config.schema import RecallConfig
from kairox.default_plugins.scripted_model import ScriptedModel
from kairox.runtime.facade import AppFacade
from kairox.runtime.session import Session

CONFIG = '[profiles.default]\nbackend = "scripted"\ncontext_window = 8192\nheadroom = 512\n'


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def sentence(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(6, 30))).capitalize() + "."


async def fill(facade: AppFacade, messages: int, rng: random.Random, words: list[str]) -> None:
    per_session = 100
    for number in range(messages // per_session):
        batch = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": sentence(rng, words),
                "name": "Ann" if i % 2 == 0 else "Bob",
                "time": f"2025-{1 + number % 12:02d}-{1 + number % 28:02d}T10:{i % 60:02d}:00",
            }
            for i in range(per_session)
        ]
        await facade.append_messages(f"earlier-{number}", batch)


async def timed_turns(sessions: dict[str, Session], prompts: list[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for index, prompt in enumerate(prompts):
        order = list(sessions) if index % 2 == 0 else list(reversed(sessions))
        for name in order:
            started = time.perf_counter()
            await sessions[name].turn(prompt)
            times[name].append((time.perf_counter() - started) * 1000)
    return times


def p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


async def main(messages: int, turns: int) -> dict[str, object]:
    rng = random.Random(7)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory(prefix="kairox-recall-latency-") as folder:
        workspace, state = Path(folder) / "ws", Path(folder) / "state"
        workspace.mkdir()
        (workspace / "kairox.toml").write_text(CONFIG)
        (workspace / "notes.md").write_text("# Notes\n\n" + sentence(rng, words) * 20)
        (workspace / "todo.md").write_text("# Todo\n\n" + sentence(rng, words) * 20)
        with_recall = AppFacade(cwd=workspace, state_dir=state)
        with_recall.index_workspace()
        await fill(with_recall, messages, rng, words)
        started = time.perf_counter()
        with_recall.archive().sync()
        indexed_s = time.perf_counter() - started
        config = dataclasses.replace(with_recall.config, recall=RecallConfig(sessions="none"))
        without = AppFacade(cwd=workspace, state_dir=state, config=config)
        prompts = [sentence(rng, words) for _ in range(turns + 5)]
        sessions = {
            "recall": Session(with_recall, "now-recall", backend=ScriptedModel(["Fine."] * 999)),
            "none": Session(without, "now-none", backend=ScriptedModel(["Fine."] * 999)),
        }
        for session in sessions.values():
            session.start()
        try:
            await timed_turns(sessions, prompts[:5])  # warm: sources, models, caches
            times = await timed_turns(sessions, prompts[5:])
        finally:
            for session in sessions.values():
                await session.close()
            with_recall.close()
            without.close()
    difference = [a - b for a, b in zip(times["recall"], times["none"], strict=True)]
    return {
        "archive_messages": messages,
        "turn_pairs": turns,
        "index_s": round(indexed_s, 2),
        "recall_p50_ms": round(statistics.median(times["recall"]), 2),
        "none_p50_ms": round(statistics.median(times["none"]), 2),
        "recall_p95_ms": round(p95(times["recall"]), 2),
        "none_p95_ms": round(p95(times["none"]), 2),
        "difference_p50_ms": round(statistics.median(difference), 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    print(json.dumps(asyncio.run(main(count, pairs))))
