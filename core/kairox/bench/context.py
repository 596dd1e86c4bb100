"""``kairox bench context``: context-assembly time against history size and memory count.

A generated conversation of N whole turns (10, 100, 1,000, 10,000 by default; a user
message and an assistant reply each, with event ids as a session gives them) and M
approved memories (0, 100, 1,000) is assembled by
:class:`~kairox.context.assembler.ContextAssembler` for a profile's window (128k tokens
and 4,096 headroom by default, the built-in ``default`` profile), two ways:

* ``warm``: what a running session does. One :class:`~kairox.context.tokens.TokenCounter`
  lives across turns; the conversation is assembled once untimed, then each timed
  assembly is the next turn: the window moves on by one turn (one new turn, one new
  prompt), so only the new text is not in the cache yet.
* ``cold``: the same assemblies, each with a fresh counter (a restarted process, or no
  cache at all): every message that could fit is tokenised again.

Each row gives the median and p95 wall time of ``repeats`` assemblies, the median number
of token counts the cache could not answer (``cache_misses``: what was tokenised), how
many turns fitted, and the tokens used. With a warm cache the misses stay constant
whatever the history size: a turn costs O(new text) in tokenisation, and what remains
grows only with the number of turns that fit (one dictionary look-up each); the turns
dropped are one range in the trace, and the memories are rendered, counted and ranked
once (the counter's ``derived`` cache), so a warm turn re-reads them only.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from kairox.bench.report import created_now, machine, percentile
from kairox.context.assembler import AssemblyInput, ContextAssembler, HistoryTurn
from kairox.context.tokens import DEFAULT_ENCODING, TokenCounter
from kairox.memory.store import MemoryRecord
from kairox.support.models import ChatMessage

__all__ = [
    "DEFAULT_HISTORY_SIZES",
    "DEFAULT_MEMORY_COUNTS",
    "benchmark",
    "make_history",
    "make_memories",
    "measure",
]

DEFAULT_HISTORY_SIZES = (10, 100, 1_000, 10_000)
DEFAULT_MEMORY_COUNTS = (0, 100, 1_000)
MODES = ("warm", "cold")
SYSTEM_PROMPT = (
    "You are a helpful coding assistant. Answer precisely, cite file paths, and say when "
    "you are unsure."
)

Progress = Callable[[str, int, int], None]

_WORDS = (
    "the", "a", "we", "it", "to", "of", "and", "in", "for", "on", "with", "this", "that",
    "is", "are", "was", "be", "can", "should", "will", "not", "but", "when", "if", "then",
    "build", "test", "deploy", "parser", "index", "query", "cache", "token", "budget",
    "window", "session", "memory", "summary", "retrieval", "source", "latency", "error",
    "timeout", "config", "profile", "database", "migration", "schema", "column", "table",
    "request", "response", "server", "client", "thread", "loop", "queue", "worker", "file",
    "path", "module", "function", "class", "method", "value", "result", "list", "string",
    "number", "version", "release", "branch", "commit", "review", "change", "fix", "bug",
    "feature", "option", "default", "fallback", "retry", "backoff", "limit", "size", "count",
    "fast", "slow", "small", "large", "new", "old", "first", "last", "next", "every", "each",
    "run", "runs", "ran", "check", "checks", "update", "updated", "load", "loaded", "write",
    "read", "open", "close", "start", "stop", "call", "return", "raise", "catch", "log",
    "python", "sqlite", "fts5", "tiktoken", "numpy", "asyncio", "click", "pydantic",
    "README.md", "kairox.toml", "tests/test_io.py", "core/kairox/session.py", "42", "8443",
    "3.11", "2026-11-30", "v1.4.2", "HTTP", "JSON", "UTF-8", "p95", "200ms", "10k",
)  # fmt: skip


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choices(_WORDS, k=words))
    return text[0].upper() + text[1:] + "."


def _message(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(sentences))


def make_history(turns: int, *, seed: int = 3) -> list[HistoryTurn]:
    """``turns`` whole turns (user ~35 words, assistant ~70), oldest first, deterministic.

    Turn ``i`` was built from events ``2i + 1`` (the user message) and ``2i + 2`` (the
    reply), as a session would number them.
    """
    rng = random.Random(seed)
    history = []
    for number in range(turns):
        user = ChatMessage("user", _message(rng, 3))
        reply = ChatMessage("assistant", _message(rng, 6))
        history.append(HistoryTurn((user, reply), (2 * number + 1, 2 * number + 2)))
    return history


def make_memories(count: int, *, seed: int = 5) -> list[MemoryRecord]:
    """``count`` approved memories, a third each user, workspace and session scope."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    records = []
    for number in range(count):
        scope = ("user", "workspace", "session")[number % 3]
        stamp = (start + timedelta(minutes=number)).isoformat()
        records.append(
            MemoryRecord(
                id=number + 1,
                scope=scope,
                key=f"{rng.choice(_WORDS[25:80])}.{rng.choice(_WORDS[25:80])}.{number}",
                body=_sentence(rng, rng.randint(8, 20)),
                status="approved",
                workspace_id="/bench/workspace" if scope != "user" else None,
                session_id="bench-session" if scope == "session" else None,
                created_at=stamp,
                updated_at=stamp,
                approved_at=stamp if scope != "session" else None,
            )
        )
    return records


def _prompt(rng: random.Random) -> str:
    return _message(rng, 2)


def measure(
    history: Sequence[HistoryTurn],
    memories: Sequence[MemoryRecord],
    *,
    turns: int,
    mode: str,
    repeats: int,
    encoding: str = DEFAULT_ENCODING,
    context_window: int = 128_000,
    headroom: int = 4_096,
) -> dict[str, Any]:
    """Time ``repeats`` assemblies of a ``turns``-turn window sliding over ``history``.

    ``history`` must hold at least ``turns + repeats`` turns. Assembly ``r`` (1-based)
    sees turns ``r .. turns + r - 1``: for ``warm`` only the newest of them is new to
    the counter, which was primed with turns ``0 .. turns - 1``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(history) < turns + repeats:
        raise ValueError(f"need {turns + repeats} turns of history, got {len(history)}")
    rng = random.Random(turns * 7919 + len(memories))
    prompts = [_prompt(rng) for _ in range(repeats + 1)]

    def assembler(counter: TokenCounter) -> ContextAssembler:
        return ContextAssembler(
            encoding=encoding, context_window=context_window, headroom=headroom, counter=counter
        )

    def data(offset: int) -> AssemblyInput:
        return AssemblyInput(
            system_prompt=SYSTEM_PROMPT,
            prompt=prompts[offset],
            memories=memories,
            history=history[offset : offset + turns],
        )

    shared = TokenCounter(encoding)
    if mode == "warm":
        assembler(shared).assemble(data(0))  # the turns so far, counted once
    timings: list[float] = []
    misses: list[int] = []
    kept: list[int] = []
    used: list[int] = []
    for offset in range(1, repeats + 1):
        counter = shared if mode == "warm" else TokenCounter(encoding)
        builder = assembler(counter)
        item = data(offset)
        before = counter.misses
        started = time.perf_counter()
        assembly = builder.assemble(item)
        timings.append((time.perf_counter() - started) * 1000)
        misses.append(counter.misses - before)
        history_account = next(s for s in assembly.sources if s.source == "history")
        kept.append(history_account.included)
        used.append(assembly.used_tokens)
    return {
        "history_turns": turns,
        "memories": len(memories),
        "cache": mode,
        "repeats": repeats,
        "p50_ms": round(percentile(timings, 50), 3),
        "p95_ms": round(percentile(timings, 95), 3),
        "cache_misses": int(statistics.median(misses)),
        "turns_in_prompt": int(statistics.median(kept)),
        "used_tokens": int(statistics.median(used)),
    }


def benchmark(
    *,
    history_sizes: Sequence[int] = DEFAULT_HISTORY_SIZES,
    memory_counts: Sequence[int] = DEFAULT_MEMORY_COUNTS,
    repeats: int = 25,
    encoding: str = DEFAULT_ENCODING,
    context_window: int = 128_000,
    headroom: int = 4_096,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every history size x memory count x cache mode; the report ``--out`` writes."""
    if not history_sizes or any(n < 1 for n in history_sizes):
        raise ValueError(f"history sizes must be >= 1, got {list(history_sizes)}")
    if not memory_counts or any(m < 0 for m in memory_counts):
        raise ValueError(f"memory counts must be >= 0, got {list(memory_counts)}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    history = make_history(max(history_sizes) + repeats)
    all_memories = make_memories(max(memory_counts))
    cells = [(m, n, mode) for m in memory_counts for n in history_sizes for mode in MODES]
    # Every cell is measured alike; only its memories, turns and cache mode differ.
    settings: dict[str, Any] = {
        "repeats": repeats,
        "encoding": encoding,
        "context_window": context_window,
        "headroom": headroom,
    }
    rows = []
    for done, (count, turns, mode) in enumerate(cells):
        if progress is not None:
            progress("assembling", done, len(cells))
        rows.append(measure(history, all_memories[:count], turns=turns, mode=mode, **settings))
    if progress is not None:
        progress("assembling", len(cells), len(cells))
    return {
        "benchmark": "context_assembly",
        "encoding": encoding,
        "context_window": context_window,
        "headroom": headroom,
        "budget": context_window - headroom,
        "repeats": repeats,
        "rows": rows,
        "created": created_now(),
        "machine": machine(),
    }
