"""``kairox bench compaction``: does the thread survive compaction?

Long scripted sessions run through the real session actor
(:class:`~kairox.runtime.session.Session`: context assembly, auto-compaction, the event store),
with :class:`~kairox.default_plugins.scripted_model.ScriptedModel` writing the
assistant's replies. Facts are planted early, in the user's first messages: decisions,
constraints, names, numbers ("We decided to use PostgreSQL 16", "the budget must not
exceed 40,000 EUR", "the contact is Dr. Ines Alvarez", "deploy on port 8443", ...). Then
come filler turns (technical chatter with its own numbers, names and paths, so that a
summariser has to choose), and at the end one question per fact.

Measured, for each summariser and each window size:

* **retention**: after every compaction, the share of the facts planted so far whose
  exact value (``"PostgreSQL 16"``, ``"40,000 EUR"``...) appears in the messages the
  assembler would send next (the new prompt itself excluded). ``final`` is the share
  after the session's last compaction, ``mean`` and ``min`` are over all compactions.
* **question recall**: for each late question, whether the fact it asks about was in
  the prompt the model actually received.

Summarisers: ``extractive`` (the default), ``sliding-window``, and ``llm`` when a real
model backend is configured (``--profile``/``--backend``). The ``llm`` summariser is not
run against the scripted model: a scripted summary would measure only what the script
says. Its row then says ``not run`` and why. When the model fails and compaction falls
back to the sliding window, the row counts the fallbacks.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kairox.bench.compaction_facade import LlmBackend, SessionSetup, bench_facade, call_figures
from kairox.bench.compaction_scenarios import DOMAINS, make_scenario, run_scenario
from kairox.bench.report import created_now, machine
from kairox.plugin_host.registry import Registry
from kairox.support.models import ChatMessage

__all__ = [
    "DEFAULT_SUMMARIZERS",
    "DEFAULT_WINDOWS",
    "FACTS",
    "NO_BACKEND",
    "LlmBackend",
    "PlantedFact",
    "benchmark",
    "make_script",
    "run_session",
]

DEFAULT_SUMMARIZERS = ("extractive", "sliding-window", "llm")
DEFAULT_WINDOWS = (2048, 4096, 8192)
NO_BACKEND = (
    "not run: no model backend configured (pass --profile NAME for a profile with a real "
    "model backend, or --backend NAME)"
)
#: The prompt used to look at what the assembler would send right after a compaction.
PROBE = "Let's continue where we left off."

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class PlantedFact:
    """A fact the user states early: the sentence, its exact value, a late question."""

    statement: str
    value: str
    question: str


FACTS: tuple[PlantedFact, ...] = (
    PlantedFact(
        "We decided to use PostgreSQL 16 for the main database.",
        "PostgreSQL 16",
        "Which database did we settle on for the main store?",
    ),
    PlantedFact(
        "The budget must not exceed 40,000 EUR for the whole project.",
        "40,000 EUR",
        "What was our spending cap again?",
    ),
    PlantedFact(
        "The contact on the client side is Dr. Ines Alvarez.",
        "Dr. Ines Alvarez",
        "Who is our contact on the client side?",
    ),
    PlantedFact(
        "We deploy the service on port 8443 behind the load balancer.",
        "8443",
        "Which port does the service listen on in production?",
    ),
    PlantedFact(
        "The hard launch deadline is 2027-03-15.",
        "2027-03-15",
        "When do we have to launch?",
    ),
    PlantedFact(
        "Application logs must go to /var/log/bluefin/app.log.",
        "/var/log/bluefin/app.log",
        "Where should the application write its logs?",
    ),
    PlantedFact(
        "We agreed on a rate limit of 120 requests per minute per API key.",
        "120 requests per minute",
        "What rate limit did we agree on for API keys?",
    ),
    PlantedFact(
        "The staging cluster is called orion-stg-2.",
        "orion-stg-2",
        "What is the name of the staging cluster?",
    ),
    PlantedFact(
        "Passwords must be hashed with Argon2id, never stored in plain text.",
        "Argon2id",
        "How must we store user passwords?",
    ),
    PlantedFact(
        "The new checkout stays behind the feature flag enable_fast_checkout.",
        "enable_fast_checkout",
        "Which feature flag guards the new checkout?",
    ),
    PlantedFact(
        "Nightly backups are kept for 35 days.",
        "35 days",
        "How long do we keep the nightly backups?",
    ),
    PlantedFact(
        "The customer reference number is KX-4471-B.",
        "KX-4471-B",
        "What is the customer reference number?",
    ),
)

_GOAL = (
    "I want to plan the move of our shop backend to the new platform, and I need your "
    "help to keep the plan consistent over the next weeks."
)
_COMPONENTS = (
    "order service", "search indexer", "payment adapter", "image pipeline", "session store",
    "notification worker", "inventory sync", "report generator", "auth gateway", "cart API",
)  # fmt: skip
_TOOLS = ("ruff", "mypy", "pytest", "locust", "pg_stat_statements", "k6", "bandit", "trivy")
_PEOPLE = ("Marek Novak", "Sofia Lindqvist", "Tomás Ruiz", "Hana Sato", "Olu Adeyemi")
_PATHS = (
    "services/orders/config.yaml", "deploy/helm/values.yaml", "src/search/indexer.py",
    "docs/runbook.md", "infra/terraform/main.tf", "scripts/load_test.js",
)  # fmt: skip
_TOPICS = (
    "connection pooling", "cache invalidation", "retry storms", "schema drift",
    "cold starts", "queue back-pressure", "log volume", "flaky integration tests",
)  # fmt: skip
_USER_FILLER = (
    "Can you look at the {component} next? Its p95 latency went up to {ms} ms after the last release.",
    "{person} asked whether {topic} could explain the alerts we saw on the {component}.",
    "Let's review {path}; I think the {component} reads a stale setting from it.",
    "How would you approach {topic} in the {component}?",
    "The {tool} run on {path} reported {n} findings; which ones matter?",
    "Please draft a short plan for the {component} rollout.",
)
_ASSISTANT_FILLER = (
    "The {component} reads its settings from {path} and caches them for {n} seconds.",
    "I ran {tool} against {path}; it reported {n} findings, mostly about {topic}.",
    "{person} suggested splitting the {component} into {small} smaller services.",
    "A reasonable next step is to profile the {component} under load and compare the p95 latency.",
    "With {topic}, the usual culprit is a missing timeout, so I would start there.",
    "The {component} currently handles about {rps} requests per second at peak.",
    "If we keep {topic} in mind, the rollout can go in {small} stages with a canary first.",
    "The dashboard shows {n} restarts of the {component} during the night.",
    "I would keep the change small and add a test next to {path} before touching the {component}.",
    "Watch the error budget: last week the {component} spent most of it on {topic}.",
)
_ACKNOWLEDGE = "Noted, I will keep that in mind for the rest of the plan."
_NOT_SURE = "Let me check my notes on that before I answer."


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        component=rng.choice(_COMPONENTS),
        tool=rng.choice(_TOOLS),
        person=rng.choice(_PEOPLE),
        path=rng.choice(_PATHS),
        topic=rng.choice(_TOPICS),
        n=rng.randint(2, 29),
        small=rng.randint(2, 5),
        ms=rng.randint(180, 900),
        rps=rng.randint(50, 99) * 10,
    )


def _assistant_filler(rng: random.Random, sentences: int) -> str:
    return " ".join(_fill(rng.choice(_ASSISTANT_FILLER), rng) for _ in range(sentences))


@dataclass(frozen=True)
class ScriptedSession:
    """The user prompts, the scripted replies, and where each fact is planted and asked."""

    prompts: list[str]
    replies: list[str]
    planted_at: dict[int, list[PlantedFact]]  # turn index -> facts stated in that turn
    asked_at: dict[int, PlantedFact]  # turn index -> the fact that turn asks about


def make_script(
    turns: int = 80,
    *,
    seed: int = 0,
    facts: Sequence[PlantedFact] = FACTS,
    facts_per_turn: int = 2,
) -> ScriptedSession:
    """A session of ``turns`` turns: facts in the first turns, questions in the last.

    The facts (in an order shuffled by ``seed``) are stated ``facts_per_turn`` at a time
    in the first user messages, one question per fact closes the session, and filler
    fills the middle. Filler never contains a fact's value, and no question does either.
    """
    if facts_per_turn < 1:
        raise ValueError(f"facts_per_turn must be >= 1, got {facts_per_turn}")
    planting = -(-len(facts) // facts_per_turn)
    if turns < planting + len(facts) + 1:
        raise ValueError(
            f"{turns} turns cannot hold {planting} planting turns, a filler turn and "
            f"{len(facts)} questions; use at least {planting + len(facts) + 1}"
        )
    rng = random.Random(seed)
    order = list(facts)
    rng.shuffle(order)
    prompts: list[str] = []
    replies: list[str] = []
    planted_at: dict[int, list[PlantedFact]] = {}
    asked_at: dict[int, PlantedFact] = {}
    for turn in range(planting):
        batch = order[turn * facts_per_turn : (turn + 1) * facts_per_turn]
        planted_at[turn] = batch
        opening = _GOAL if turn == 0 else _fill(rng.choice(_USER_FILLER), rng)
        prompts.append(" ".join([opening, *(fact.statement for fact in batch)]))
        replies.append(f"{_ACKNOWLEDGE} {_assistant_filler(rng, rng.randint(3, 5))}")
    questions = list(order)
    rng.shuffle(questions)
    for _ in range(turns - planting - len(questions)):
        prompts.append(
            " ".join(_fill(rng.choice(_USER_FILLER), rng) for _ in range(rng.randint(1, 2)))
        )
        replies.append(_assistant_filler(rng, rng.randint(6, 10)))
    for fact in questions:
        asked_at[len(prompts)] = fact
        prompts.append(fact.question)
        replies.append(_NOT_SURE)
    for text in [*prompts, *replies]:
        for fact in facts:
            if fact.value in text and fact.statement not in text:
                raise ValueError(f"generated text leaks the value {fact.value!r}: {text!r}")
    for index, fact in asked_at.items():
        if fact.value in prompts[index]:
            raise ValueError(f"question {prompts[index]!r} gives its own answer away")
    return ScriptedSession(prompts, replies, planted_at, asked_at)


def _present(messages: Sequence[ChatMessage], facts: Sequence[PlantedFact]) -> list[str]:
    """The values of ``facts`` found in ``messages`` except the last (the new prompt)."""
    text = "\n".join(message.content for message in messages[:-1])
    return [fact.value for fact in facts if fact.value in text]


async def run_session(
    script: ScriptedSession, setup: SessionSetup, session_id: str = "bench"
) -> dict[str, Any]:
    """Play ``script`` through a real session; retention after each compaction and recall."""
    from kairox.default_plugins.scripted_model import ScriptedModel
    from kairox.runtime.session import open_session

    facade = bench_facade(setup)
    model = ScriptedModel(script.replies, chunk_size=64)
    planted: list[PlantedFact] = []
    compactions: list[dict[str, Any]] = []
    answered: list[bool] = []
    summarizers_used: list[str] = []
    async with open_session(facade, session_id, backend=model) as session:
        for index, prompt in enumerate(script.prompts):
            planted += script.planted_at.get(index, [])
            result = await session.turn(prompt)
            if index in script.asked_at:
                sent = model.requests[index]
                answered.append(bool(_present(sent, [script.asked_at[index]])))
            compaction = result.compaction
            if compaction is None or compaction.status != "completed":
                continue
            summarizers_used.append(compaction.summarizer or "")
            assembly = await session.assemble(PROBE)
            present = _present(assembly.messages, planted)
            compactions.append(
                {
                    "turn": index + 1,
                    "summarizer": compaction.summarizer,
                    "fallback": compaction.fallback,
                    "planted": len(planted),
                    "present": len(present),
                    "retention": round(len(present) / len(planted), 4) if planted else 1.0,
                    "missing": [f.value for f in planted if f.value not in present],
                }
            )
    return {
        "compactions": compactions,
        "question_recall": round(sum(answered) / len(answered), 4) if answered else None,
        "fallbacks": sum(1 for c in compactions if c["fallback"]),
        **call_figures(facade.calls),
    }


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _summarise(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    every = [c["retention"] for s in sessions for c in s["compactions"]]
    finals = [s["compactions"][-1]["retention"] for s in sessions if s["compactions"]]
    recall = [s["question_recall"] for s in sessions if s["question_recall"] is not None]
    return {
        "compactions": _mean([len(s["compactions"]) for s in sessions]),
        "retention_final": _mean(finals),
        "retention_mean": _mean(every),
        "retention_min": round(min(every), 4) if every else None,
        "question_recall": _mean(recall),
        "fallbacks": sum(s["fallbacks"] for s in sessions),
        **_call_summary(sessions),
    }


def _call_summary(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """Summariser time per compaction (median, max) and whether every summary fit."""
    times = [t for s in sessions for t in s["summary_ms"]]
    sizes = [n for s in sessions for n in s["summary_messages"]]
    return {
        "summary_ms_median": round(statistics.median(times), 2) if times else None,
        "summary_ms_max": round(max(times), 2) if times else None,
        "summary_messages_median": statistics.median(sizes) if sizes else None,
        "within_budget": all(s["within_budget"] for s in sessions),
        "budget_use_max": round(max((s["budget_use_max"] for s in sessions), default=0.0), 4),
        "model_dropped": sum(s["model_dropped"] for s in sessions),
    }


def _summarise_scenario(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`_summarise` plus corrections: newest value kept, stale value shown."""
    finals = [s["compactions"][-1] for s in sessions if s["compactions"]]
    kept = sum(c["corrections_kept"] for c in finals)
    made = sum(c["corrections"] for c in finals)
    return {
        **_summarise(sessions),
        "corrections_kept": round(kept / made, 4) if made else None,
        "stale_shown": sum(len(c["stale_shown"]) for s in sessions for c in s["compactions"]),
    }


def benchmark(
    registry: Registry,
    pm: Any,
    *,
    summarizers: Sequence[str] = DEFAULT_SUMMARIZERS,
    windows: Sequence[int] = DEFAULT_WINDOWS,
    turns: int = 80,
    sessions: int = 3,
    llm: LlmBackend | None = None,
    llm_reason: str = NO_BACKEND,
    progress: Progress | None = None,
    scenario_turns: int = 60,
) -> dict[str, Any]:
    """Every summariser x window over ``sessions`` scripted sessions (seeds 0, 1, ...):
    the original planted-facts session (``results``) and each domain scenario with
    corrections (``scenarios``, ``scenario_turns`` turns each).

    ``llm`` is the real backend for the ``llm`` summariser; without one its rows say
    ``llm_reason`` and nothing runs.
    """
    if sessions < 1:
        raise ValueError(f"sessions must be >= 1, got {sessions}")
    if not windows or any(w < 256 for w in windows):
        raise ValueError(f"windows must be >= 256 tokens, got {list(windows)}")
    unknown = sorted(set(summarizers) - set(registry.summarizers))
    if unknown:
        known = ", ".join(sorted(registry.summarizers))
        raise ValueError(f"unknown summarizers {unknown}; installed: {known}")
    scripts = [make_script(turns, seed=seed) for seed in range(sessions)]
    runnable = [s for s in summarizers if s != "llm" or llm is not None]
    total = len(runnable) * len(windows) * sessions * (1 + len(DOMAINS))
    done = 0
    results = []
    with tempfile.TemporaryDirectory(prefix="kairox-bench-compaction-") as folder:
        for summarizer in summarizers:
            for window in windows:
                row: dict[str, Any] = {"summarizer": summarizer, "window": window}
                if summarizer == "llm" and llm is None:
                    results.append({**row, "status": "not run", "reason": llm_reason})
                    continue
                ran = []
                for seed, script in enumerate(scripts):
                    if progress is not None:
                        progress("sessions", done, total)
                    state = Path(folder) / f"{summarizer}-{window}-{seed}"
                    setup = SessionSetup(summarizer, window, registry, pm, state, llm)
                    ran.append(asyncio.run(run_session(script, setup, f"bench-{seed}")))
                    done += 1
                summary = _summarise(ran)
                status = "ok" if not summary["fallbacks"] else "ran with fallbacks"
                results.append({**row, "status": status, **summary, "sessions": ran})
                if summarizer == "llm" and llm is not None:
                    results[-1]["model"] = llm.label
        scenarios = _scenario_rows(
            registry,
            pm,
            summarizers=runnable,
            windows=windows,
            turns=scenario_turns,
            sessions=sessions,
            llm=llm,
            folder=Path(folder),
        )
    if progress is not None:
        progress("sessions", total, total)
    return {
        "scenario_turns": scenario_turns,
        "scenarios": scenarios,
        "benchmark": "compaction_retention",
        "turns": turns,
        "sessions": sessions,
        "facts": [{"statement": f.statement, "value": f.value} for f in FACTS],
        "windows": list(windows),
        "headroom": "window / 8",
        "results": results,
        "created": created_now(),
        "machine": machine(),
    }


def _scenario_rows(
    registry: Registry,
    pm: Any,
    *,
    summarizers: Sequence[str],
    windows: Sequence[int],
    turns: int,
    sessions: int,
    llm: LlmBackend | None,
    folder: Path,
) -> list[dict[str, Any]]:
    """One row per domain x summariser x window, over ``sessions`` seeds."""
    rows = []
    for domain in DOMAINS:
        scripts = [make_scenario(domain, turns, seed=seed) for seed in range(sessions)]
        for summarizer in summarizers:
            for window in windows:
                ran = []
                for seed, script in enumerate(scripts):
                    state = folder / f"{domain.name}-{summarizer}-{window}-{seed}"
                    setup = SessionSetup(summarizer, window, registry, pm, state, llm)
                    ran.append(
                        asyncio.run(run_scenario(script, setup, f"bench-{domain.name}-{seed}"))
                    )
                rows.append(
                    {
                        "scenario": domain.name,
                        "summarizer": summarizer,
                        "window": window,
                        **_summarise_scenario(ran),
                        "sessions": ran,
                    }
                )
    return rows
