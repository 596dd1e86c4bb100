"""Scripted sessions for ``kairox bench compaction`` beyond the original planted-facts one.

Written from the point of view of a user, not of the summariser: each domain states its
facts the way people do (some by the user, some reported by the assistant from its tool
work, some only in a tool's output), corrects some of them later in one of several
phrasings, fills the middle with chatter that has its own numbers and names, and closes
with one question per fact. Retention then counts only a fact's newest value, and a
superseded value shown in the summary counts as a miss.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox.bench.compaction_facade import SessionSetup

__all__ = [
    "CORRECTIONS",
    "DOMAINS",
    "Domain",
    "ScenarioFact",
    "ScenarioSession",
    "make_scenario",
    "run_scenario",
]


@dataclass(frozen=True, slots=True)
class ScenarioFact:
    """A fact: how it is first stated, by whom, its value, and an optional correction."""

    key: str
    statement: str
    value: str
    question: str
    source: str = "user"  # "user", "assistant" (reported in a reply) or "tool" (an output)
    corrected: str | None = None  # the new value, stated later by the user
    subject: str = ""  # how a correction names it ("the reference genome")
    tool: str = ""  # the tool whose output states it, for source "tool"


@dataclass(frozen=True)
class Domain:
    """One kind of project: its goal, its facts, and its filler."""

    name: str
    goal: str
    facts: tuple[ScenarioFact, ...]
    user_filler: tuple[str, ...]
    assistant_filler: tuple[str, ...]
    words: dict[str, tuple[str, ...]]


# Correction phrasings; {subject} names the fact, {new} and {old} are values.
CORRECTIONS = (
    "Quick correction: {subject} is {new}, not {old}.",
    "Actually, make that {new} for {subject}.",
    "Change of plans, {subject} will be {new} from now on.",
    "I got that wrong earlier: {subject} should be {new}.",
    "Please update {subject} to {new}; {old} is out.",
    "We are switching {subject} over to {new} instead of {old}.",
)

DOMAINS: tuple[Domain, ...] = (
    Domain(
        name="genomics",
        goal="I need a reproducible variant-calling pipeline for our cohort study, and I "
        "want you to help me keep its settings straight while we build it.",
        facts=(
            ScenarioFact(
                "genome",
                "The reference genome for the cohort is GRCh37.",
                "GRCh37",
                "Which reference genome are we aligning against?",
                corrected="GRCh38",
                subject="the reference genome",
            ),
            ScenarioFact(
                "samples",
                "We have 1,284 samples in the first batch.",
                "1,284 samples",
                "How many samples were in the first batch?",
            ),
            ScenarioFact(
                "bucket",
                "Raw reads live in gs://cohort-raw-7731.",
                "gs://cohort-raw-7731",
                "Where are the raw reads stored?",
            ),
            ScenarioFact(
                "caller",
                "Variant calling must use DeepVariant 1.6, never an unpinned version.",
                "DeepVariant 1.6",
                "Which variant caller version did we pin?",
            ),
            ScenarioFact(
                "run",
                "I ran the alignment dry run; the scheduler assigned job id ALN-58213.",
                "ALN-58213",
                "What job id did the alignment dry run get?",
                source="assistant",
            ),
            ScenarioFact(
                "qc",
                "qc_report: 17 samples failed the coverage threshold of 30x",
                "17 samples",
                "How many samples failed the coverage check?",
                source="tool",
                tool="qc_report",
            ),
            ScenarioFact(
                "owner",
                "The data steward for this study is Priya Raman.",
                "Priya Raman",
                "Who is the data steward?",
            ),
            ScenarioFact(
                "threads",
                "Each alignment job gets 16 threads.",
                "16 threads",
                "How many threads does an alignment job get?",
                corrected="24 threads",
                subject="the thread count per alignment job",
            ),
        ),
        user_filler=(
            "Could the {stage} step explain why the {metric} looked odd in batch {n}?",
            "{person} mentioned the {stage} logs were noisy again.",
            "What do you think about caching the {stage} outputs?",
            "Let's revisit the {stage} stage; the runtime was {minutes} minutes last night.",
        ),
        assistant_filler=(
            "The {stage} step usually dominates the runtime when the {metric} is low.",
            "{person} could double-check the {stage} parameters against batch {n}.",
            "A small test set of {n} samples would let us iterate on {stage} faster.",
            "I would log the {metric} per sample so the {stage} drift shows early.",
            "The {stage} container took {minutes} minutes to start on the last run.",
        ),
        words={
            "stage": ("trimming", "alignment", "deduplication", "recalibration", "annotation"),
            "metric": ("duplication rate", "insert size", "mapping quality", "GC bias"),
            "person": ("Lukas Brenner", "Amara Okafor", "Jin Park"),
        },
    ),
    Domain(
        name="homelab",
        goal="Help me plan the rebuild of my home network and server rack so I do not "
        "lose track of the settings over the coming evenings.",
        facts=(
            ScenarioFact(
                "port",
                "The reverse proxy listens on port 8443.",
                "8443",
                "Which port does the reverse proxy listen on?",
                corrected="9443",
                subject="the reverse proxy port",
            ),
            ScenarioFact(
                "subnet",
                "The IoT devices go on the 10.20.30.0/24 subnet.",
                "10.20.30.0/24",
                "Which subnet are the IoT devices on?",
            ),
            ScenarioFact(
                "nas",
                "The NAS is called vault-02.",
                "vault-02",
                "What is the NAS called?",
            ),
            ScenarioFact(
                "rule",
                "Never expose the admin panel to the internet.",
                "Never expose the admin panel",
                "Can the management UI be reachable from outside?",
            ),
            ScenarioFact(
                "cert",
                "I checked the certificate: it expires on 2027-04-30.",
                "2027-04-30",
                "When does the certificate expire?",
                source="assistant",
            ),
            ScenarioFact(
                "backup",
                "backup_job finished: snapshot snap-4f9c2e written, 212 GB",
                "snap-4f9c2e",
                "What was the id of the last backup snapshot?",
                source="tool",
                tool="backup_job",
            ),
            ScenarioFact(
                "ups",
                "The UPS gives us 25 minutes of runtime.",
                "25 minutes",
                "How long does the UPS last?",
                corrected="40 minutes",
                subject="the UPS runtime",
            ),
        ),
        user_filler=(
            "The {device} dropped off the network twice this week, any idea why?",
            "{person} wants the {device} on a separate VLAN.",
            "I measured {n} ms of latency to the {device} over wifi.",
            "Should the {device} get a static lease?",
        ),
        assistant_filler=(
            "A static lease for the {device} avoids most of these dropouts.",
            "With {n} devices on one switch, the {device} may be starved at peak.",
            "{person} is right that the {device} should be isolated.",
            "Firmware {n}.{m} on the {device} fixed a similar issue for others.",
            "I would graph the {device} traffic for a week before changing anything.",
        ),
        words={
            "device": ("printer", "thermostat", "media box", "camera", "mesh node"),
            "person": ("Noor Haddad", "Elias Berg", "Mia Costa"),
            "stage": ("-",),
            "metric": ("-",),
        },
    ),
)


@dataclass(frozen=True)
class ScenarioSession:
    """Prompts, replies and tool outputs of one session, and what is asked where."""

    domain: str
    prompts: list[str]
    replies: list[str]
    tools: dict[int, tuple[str, str]]  # turn index -> (tool, output) recorded after the reply
    planted_at: dict[int, list[ScenarioFact]] = field(default_factory=dict)
    corrected_at: dict[int, list[ScenarioFact]] = field(default_factory=dict)
    asked_at: dict[int, ScenarioFact] = field(default_factory=dict)


def _fill(template: str, words: dict[str, tuple[str, ...]], rng: random.Random) -> str:
    return template.format(
        stage=rng.choice(words.get("stage", ("-",))),
        metric=rng.choice(words.get("metric", ("-",))),
        person=rng.choice(words["person"]),
        device=rng.choice(words.get("device", ("-",))),
        n=rng.randint(2, 60),
        m=rng.randint(0, 9),
        minutes=rng.randint(3, 90),
    )


def make_scenario(domain: Domain, turns: int = 60, *, seed: int = 0) -> ScenarioSession:
    """A session in ``domain``: facts first, corrections a third of the way, questions last."""
    rng = random.Random(seed)
    facts = list(domain.facts)
    rng.shuffle(facts)
    corrected = [f for f in facts if f.corrected]
    if turns < len(facts) + len(corrected) + len(facts) + 4:
        raise ValueError(f"{turns} turns are too few for domain {domain.name!r}")
    prompts: list[str] = []
    replies: list[str] = []
    tools: dict[int, tuple[str, str]] = {}
    session = ScenarioSession(domain.name, prompts, replies, tools)

    values = [v for f in facts for v in (f.value, f.corrected) if v]

    def clean(templates: tuple[str, ...]) -> str:
        while True:  # filler never states a fact's value by chance
            text = _fill(rng.choice(templates), domain.words, rng)
            if not any(value in text for value in values):
                return text

    def filler_user() -> str:
        return clean(domain.user_filler)

    def filler_reply(sentences: int) -> str:
        return " ".join(clean(domain.assistant_filler) for _ in range(sentences))

    for index, fact in enumerate(facts):
        opening = domain.goal if index == 0 else filler_user()
        session.planted_at[len(prompts)] = [fact]
        if fact.source == "user":
            prompts.append(f"{opening} {fact.statement}")
            replies.append(f"Understood. {filler_reply(2)}")
        elif fact.source == "assistant":
            prompts.append(f"{opening} Can you check on that for me?")
            replies.append(f"{fact.statement} {filler_reply(2)}")
        else:
            prompts.append(f"{opening} Please run {fact.tool} and tell me what it says.")
            replies.append(f"Running {fact.tool} now. {filler_reply(1)}")
            tools[len(prompts) - 1] = (fact.tool, fact.statement)
    middle = turns - len(facts) - len(facts)
    correct_from = len(prompts) + middle // 3
    for step in range(middle):
        at = len(prompts)
        if step >= middle // 3 and corrected and at >= correct_from and step % 3 == 0:
            fact = corrected.pop(0)
            phrase = rng.choice(CORRECTIONS).format(
                subject=fact.subject, new=fact.corrected, old=fact.value
            )
            session.corrected_at[at] = [fact]
            prompts.append(phrase)
            replies.append(f"Got it, I have updated that. {filler_reply(2)}")
            continue
        prompts.append(" ".join(filler_user() for _ in range(rng.randint(1, 2))))
        replies.append(filler_reply(rng.randint(5, 8)))
    if corrected:
        raise ValueError(f"{turns} turns leave no room for every correction in {domain.name!r}")
    questions = list(facts)
    rng.shuffle(questions)
    for fact in questions:
        session.asked_at[len(prompts)] = fact
        prompts.append(fact.question)
        replies.append("Let me look back at what we settled.")
    return session


# -- running a scenario ----------------------------------------------------------------------

#: The prompt used to look at what the assembler would send right after a compaction.
PROBE = "Let's continue where we left off."


def _score(
    text: str, summary: str, live: dict[str, tuple[str, str | None]], settled: set[str]
) -> tuple[list[str], list[str]]:
    """Facts whose newest value is in ``text`` with no stale value in ``summary``; and the
    facts whose stale value ``summary`` presents.

    Only corrections the summary already covers (``settled``) count as stale: while the
    correction is still in the verbatim history right after the summary, the prompt
    itself says the old value is gone.
    """
    stale = [
        key
        for key, (_, old) in live.items()
        if old is not None and key in settled and old in summary
    ]
    kept = [key for key, (value, _) in live.items() if value in text and key not in stale]
    return kept, stale


async def run_scenario(
    script: ScenarioSession, setup: SessionSetup, session_id: str = "bench"
) -> dict[str, Any]:
    """Play ``script`` through a real session: retention of newest values, stale values
    shown, question recall, and the summariser's time and budget per compaction."""
    from kairox.bench.compaction_facade import bench_facade, call_figures
    from kairox.default_plugins.scripted_model import ScriptedModel
    from kairox.runtime.session import KEEP_RECENT_TURNS, open_session
    from kairox.store.events import ToolInvocationCompleted

    facade = bench_facade(setup)
    model = ScriptedModel(script.replies, chunk_size=64)
    live: dict[str, tuple[str, str | None]] = {}
    corrected: dict[str, int] = {}  # fact key -> the turn that corrected it
    compactions: list[dict[str, Any]] = []
    answered: list[bool] = []
    summary = ""
    async with open_session(facade, session_id, backend=model) as session:
        for index, prompt in enumerate(script.prompts):
            for fact in script.planted_at.get(index, []):
                live[fact.key] = (fact.value, None)
            for fact in script.corrected_at.get(index, []):
                live[fact.key] = (fact.corrected or fact.value, fact.value)
                corrected[fact.key] = index
            result = await session.turn(prompt)
            if index in script.tools:
                tool, output = script.tools[index]
                session.events.append(
                    session.session_id,
                    facade.workspace_id,
                    ToolInvocationCompleted(tool=tool, output=output, turn_id=result.turn_id),
                )
            if index in script.asked_at:
                asked = script.asked_at[index].key
                sent = "\n".join(m.content for m in model.requests[index][:-1])
                kept, _ = _score(sent, summary, {asked: live[asked]}, set(corrected))
                answered.append(bool(kept))
            if result.compaction is None or result.compaction.status != "completed":
                continue
            summary = result.compaction.summary
            assembly = await session.assemble(PROBE)
            text = "\n".join(m.content for m in assembly.messages[:-1])
            # Compaction keeps the last KEEP_RECENT_TURNS verbatim and summarises the rest.
            settled = {k for k, at in corrected.items() if at <= index - KEEP_RECENT_TURNS}
            kept, stale = _score(text, summary, live, settled)
            compactions.append(
                {
                    "turn": index + 1,
                    "planted": len(live),
                    "present": len(kept),
                    "retention": round(len(kept) / len(live), 4) if live else 1.0,
                    "missing": sorted(set(live) - set(kept)),
                    "stale_shown": stale,
                    "corrections_kept": sum(1 for k in corrected if k in kept),
                    "corrections": len(corrected),
                }
            )
    return {
        "domain": script.domain,
        "compactions": compactions,
        "question_recall": round(sum(answered) / len(answered), 4) if answered else None,
        "fallbacks": 0,
        **call_figures(facade.calls),
    }
