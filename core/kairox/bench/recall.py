"""``kairox bench recall``: evidence recall on LoCoMo-format conversations.

Each conversation is imported as one session of a fresh workspace (every turn one message
with its speaker's name and its session's time, through
:meth:`~kairox.runtime.facade.AppFacade.append_messages`), and each question is asked of it:

- **prompt@B**: the prompt ``context(question, session=...)`` assembles with a profile whose
  budget is ``B`` tokens (history, recall and the rest as a turn would have them); an
  evidence turn counts as present when its text is in the prompt;
- **recall@k**: the recall source alone, its ``k`` best messages;
- the references in the same run: **newest@B**, the newest turns that fit ``B`` tokens (a
  window with no recall), and **bm25@k**, rank_bm25 over the turns (lower-case words).

Scores are evidence recall (the share of a question's evidence turns present), averaged
over questions, per category and over categories 1-4 (``1-4``), as published comparisons
leave the adversarial category 5 out.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kairox.bench.locomo import Conversation, LocomoError, load_locomo
from kairox.bench.report import created_now, machine
from kairox.context.tokens import count_message_tokens

__all__ = ["RecallBenchError", "benchmark"]

Progress = Callable[[str, int, int], None]

_WORD = re.compile(r"\w+")
#: Categories as LoCoMo names them.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MAIN = "1-4"


class RecallBenchError(ValueError):
    """The benchmark cannot run as asked (a bad file, an unknown conversation)."""


def _config(budgets: Sequence[int], embedder: str) -> str:
    profiles = "".join(
        f'\n[profiles.b{budget}]\nbackend = "scripted"\ncontext_window = {budget}\n'
        "headroom = 0\nauto_compact = false\n"
        for budget in budgets
    )
    # Each conversation is its own session; recall stays within it.
    return (
        '[profiles.default]\nbackend = "scripted"\ncontext_window = 1000000\nheadroom = 0\n'
        "auto_compact = false\n"
        f'{profiles}\n[recall]\nsessions = "own"\n\n[workspace]\n'
        f'embedding_backend = "{embedder}"\n'
    )


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _share(found: set[str], evidence: Sequence[str]) -> float:
    return sum(1 for e in evidence if e in found) / len(evidence)


def _newest_that_fit(conversation: Conversation, budget: int, encoding: str) -> set[str]:
    """The turns a window with no recall holds: the newest, each a chat message."""
    kept: set[str] = set()
    spent = 0
    for turn in reversed(conversation.turns):
        spent += count_message_tokens("user", turn.line, encoding)
        if spent > budget:
            break
        kept.add(turn.dia_id)
    return kept


class _Scores:
    """Per-question scores by system, averaged per category at the end."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[int, float]]] = {}

    def add(self, system: str, category: int, value: float) -> None:
        self.rows.setdefault(system, []).append((category, value))

    def table(self) -> dict[str, dict[str, float]]:
        out = {}
        for system, rows in self.rows.items():
            by: dict[str, list[float]] = {}
            for category, value in rows:
                by.setdefault(str(category), []).append(value)
                if category in (1, 2, 3, 4):
                    by.setdefault(MAIN, []).append(value)
            out[system] = {key: round(statistics.fmean(v), 4) for key, v in sorted(by.items())}
        return out


def benchmark(
    dataset: Path,
    *,
    budgets: Sequence[int] = (2048, 4096, 8192),
    ks: Sequence[int] = (10, 50),
    conversations: Sequence[str] | None = None,
    embedder: str = "hashing",
    encoding: str = "o200k_base",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Import ``dataset``'s conversations and score every question with evidence."""
    from rank_bm25 import BM25Okapi

    try:
        loaded = load_locomo(dataset)
    except LocomoError as exc:
        raise RecallBenchError(str(exc)) from None
    if conversations:
        unknown = sorted(set(conversations) - {c.sample_id for c in loaded})
        if unknown:
            known = ", ".join(c.sample_id for c in loaded)
            raise RecallBenchError(f"no conversation {', '.join(unknown)} (known: {known})")
        loaded = [c for c in loaded if c.sample_id in set(conversations)]
    scores = _Scores()
    spent: dict[str, list[int]] = {str(b): [] for b in budgets}
    timings: dict[str, float] = {}
    total = sum(1 for c in loaded for q in c.questions if q.evidence)
    done = 0
    with tempfile.TemporaryDirectory(prefix="kairox-bench-recall-") as folder:
        workspace, home = Path(folder) / "workspace", Path(folder) / "home"
        workspace.mkdir()
        (workspace / "kairox.toml").write_text(_config(budgets, embedder))
        from kairox.runtime.facade import AppFacade

        with AppFacade(cwd=workspace, state_dir=home) as facade:
            started = time.perf_counter()
            ids = {c.sample_id: _import(facade, c) for c in loaded}
            timings["import_s"] = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            facade.archive().sync()
            timings["index_s"] = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            for conversation in loaded:
                by_event = {e: d for d, e in ids[conversation.sample_id].items()}
                session = f"locomo-{conversation.sample_id}"
                bm25 = BM25Okapi([_words(t.line) for t in conversation.turns])
                newest = {b: _newest_that_fit(conversation, b, encoding) for b in budgets}
                asked = [q for q in conversation.questions if q.evidence]
                prompts = asyncio.run(_prompts(facade, session, asked, budgets))
                for question, by_budget in zip(asked, prompts, strict=True):
                    category = question.category
                    texts = {t.dia_id: t.text.strip() for t in conversation.turns}
                    for budget, (prompt, used) in by_budget.items():
                        present = {d for d in question.evidence if texts[d] in prompt}
                        scores.add(f"prompt@{budget}", category, _share(present, question.evidence))
                        scores.add(
                            f"newest@{budget}", category, _share(newest[budget], question.evidence)
                        )
                        spent[str(budget)].append(used)
                    recalled = facade.recall(question.text, session_id=session, k=max(ks))
                    order = [by_event[r.event_id] for r in recalled if r.event_id in by_event]
                    ranked = bm25.get_scores(_words(question.text))
                    best = sorted(range(len(ranked)), key=lambda i: -ranked[i])[: max(ks)]
                    for k in ks:
                        top = set(order[:k])
                        scores.add(f"recall@{k}", category, _share(top, question.evidence))
                        words = {conversation.turns[i].dia_id for i in best[:k]}
                        scores.add(f"bm25@{k}", category, _share(words, question.evidence))
                    done += 1
                    if progress is not None:
                        progress("questions", done, total)
            timings["questions_s"] = round(time.perf_counter() - started, 2)
    questions: dict[str, int] = {}
    for conversation in loaded:
        for question in conversation.questions:
            if question.evidence:
                key = str(question.category)
                questions[key] = questions.get(key, 0) + 1
    questions[MAIN] = sum(v for k, v in questions.items() if k in "1234")
    return {
        "benchmark": "recall",
        "created": created_now(),
        "machine": machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "dataset": str(dataset),
        "conversations": [c.sample_id for c in loaded],
        "turns": sum(len(c.turns) for c in loaded),
        "embedder": embedder,
        "encoding": encoding,
        "budgets": list(budgets),
        "ks": list(ks),
        "questions": questions,
        "categories": {str(k): v for k, v in CATEGORIES.items()},
        "evidence_recall": scores.table(),
        "prompt_tokens": {b: round(statistics.fmean(v), 1) for b, v in spent.items() if v},
        "timings": timings,
    }


def _import(facade: Any, conversation: Conversation) -> dict[str, int]:
    """Append the conversation as one session; ``dia_id`` -> event id."""
    first = conversation.speakers[0]
    messages = [
        {
            "role": "user" if turn.speaker == first else "assistant",
            "content": turn.text,
            "name": turn.speaker,
            **({"time": turn.time} if turn.time else {}),
        }
        for turn in conversation.turns
    ]
    result = asyncio.run(
        facade.append_messages(f"locomo-{conversation.sample_id}", messages, profile="default")
    )
    return {t.dia_id: e for t, e in zip(conversation.turns, result.event_ids, strict=True)}


async def _prompts(
    facade: Any, session_id: str, questions: Sequence[Any], budgets: Sequence[int]
) -> list[dict[int, tuple[str, int]]]:
    """Each question's assembled prompt text and tokens, per budget."""
    from kairox.runtime.session import open_session

    out: list[dict[int, tuple[str, int]]] = [{} for _ in questions]
    for budget in budgets:
        async with open_session(facade, session_id, profile=f"b{budget}") as live:
            for index, question in enumerate(questions):
                assembly = await live.assemble(question.text)
                text = "\n".join(m.content for m in assembly.messages)
                out[index][budget] = (text, assembly.used_tokens)
    return out
