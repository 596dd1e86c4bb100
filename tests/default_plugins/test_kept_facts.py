"""The kept-facts ledger: what it keeps, how corrections supersede, its budget share, and
the ``llm`` summariser's guard against a model that drops the facts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from kairox.context.tokens import count_tokens
from kairox.default_plugins.summarizers import ExtractiveSummarizer, LlmSummarizer
from kairox.default_plugins.summarizers.kept_facts import (
    SECTION_KEPT,
    build_ledger,
    strip_kept_section,
)
from kairox.support.models import ChatMessage
from kairox.testing import run

ENC = "o200k_base"
GOAL = ChatMessage("user", "I want to set up the data pipeline for the genomics team this month.")


def user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage("assistant", text)


def carried(summary: str) -> ChatMessage:
    return ChatMessage("assistant", summary, name="summary")


def ledger_text(messages: Sequence[ChatMessage], max_tokens: int = 400) -> str:
    return build_ledger(messages, max_tokens=max_tokens, encoding=ENC).render()


# Phrasings written for this test, none of them the benchmark's (bench/compaction_scenarios).
HELD_OUT = [
    ("The build server runs Ubuntu 20.04.", "Sorry, I meant Ubuntu 24.04.", "24.04", "20.04"),
    ("Invoices are due within 30 days.", "Invoices are due within 45 days, not 30 days.", "45 days", "30 days"),
    ("The release branch is release/2.3.", "We no longer use release/2.3; it is release/2.4 now.", "release/2.4", "release/2.3"),
    ("Alerts go to ops-alerts@acme.io.", "Alerts now go to sre-pager@acme.io instead.", "sre-pager@acme.io", "ops-alerts"),
    ("The API listens on port 8080.", "Move it to port 8081, please.", "8081", "8080"),
    ("Our reference genome is GRCh37.", "The reference genome is GRCh38, not the older build.", "GRCh38", "GRCh37"),
]  # fmt: skip


@pytest.mark.parametrize(("first", "correction", "new", "old"), HELD_OUT)
def test_a_correction_supersedes_the_value_it_corrects(first, correction, new, old):
    history = [
        GOAL,
        user(first),
        assistant("Noted."),
        user("Now the runner config."),
        user(correction),
    ]
    text = ledger_text(history)
    assert new in text
    assert old not in text, text  # never presented as current, not even as "instead of"
    ledger = build_ledger(history, max_tokens=400, encoding=ENC)
    assert any(why.startswith("superseded by") for _, why in ledger.dropped())


def test_a_correction_keeps_what_it_is_about():
    text = ledger_text([GOAL, user("The API listens on port 8080."), user("Move it to port 8081.")])
    line = next(line for line in text.splitlines() if "8081" in line)
    assert "API listens on port" in line  # the corrected sentence, its value elided


def test_a_correction_supersedes_a_fact_carried_from_an_earlier_summary():
    first = ledger_text([GOAL, user("Each alignment job gets 16 threads."), assistant("OK.")])
    assert "16 threads" in first
    second = ledger_text(
        [carried(first), user("Actually, make that 24 threads per alignment job.")]
    )
    assert "24 threads" in second and "16 threads" not in second
    third = ledger_text([carried(second), user("Let's look at the logs next.")])
    assert "24 threads" in third and "16 threads" not in third  # carried forward again


def test_tool_outcomes_and_assistant_reports_are_kept():
    history = [
        GOAL,
        assistant("[tool create_ticket returned]\nticket OPS-5521 created in queue infra"),
        ChatMessage("tool", "Traceback (most recent call last):\nTimeoutError: db-7 unreachable", name="probe"),
        assistant("I checked the certificate: it expires on 2027-04-30."),
    ]  # fmt: skip
    text = ledger_text(history)
    assert "- tool: create_ticket: ticket OPS-5521 created" in text
    assert "- tool: probe: TimeoutError: db-7 unreachable" in text
    assert "- assistant: I checked the certificate: it expires on 2027-04-30." in text


def test_questions_and_requests_are_not_facts():
    text = ledger_text([GOAL, user("Can you look at port 9000 next?"), user("Which port is it?")])
    assert "9000" not in text


@pytest.mark.parametrize("max_tokens", [20, 60, 150])
def test_the_ledger_stays_within_its_share_and_says_what_it_left_out(max_tokens):
    history = [GOAL] + [user(f"Server srv-{i:03d} has {i * 3} GB of memory.") for i in range(40)]
    ledger = build_ledger(history, max_tokens=max_tokens, encoding=ENC)
    assert count_tokens(ledger.render(), ENC) <= max_tokens
    over = [fact for fact, why in ledger.dropped() if why.startswith("over the kept-facts")]
    assert len(over) + len(ledger.facts) == 41
    assert over  # 40 servers never fit


def test_the_extractive_summary_opens_with_the_ledger_and_never_repeats_a_stale_value():
    history = [
        GOAL,
        user("The API listens on port 8080 behind the proxy."),
        assistant("The proxy forwards port 8080 traffic to the API pods."),
        user("Change of plans: move it to port 8081."),
        assistant("Done."),
    ]
    summary = run(ExtractiveSummarizer().summarize(history, max_tokens=300, encoding=ENC))
    assert summary.startswith(f"## {SECTION_KEPT}\n")
    assert "8081" in summary
    assert "8080" not in summary


class Reply:
    """A model backend that always writes the same reply (a real stream, no network)."""

    name = "reply"

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(
        self, messages: Sequence[ChatMessage], *, model: str, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        for start in range(0, len(self.text), 5):
            yield self.text[start : start + 5]


HISTORY = [
    GOAL,
    user("We decided to pin DeepVariant 1.6 for variant calling."),
    user("Raw reads live in gs://cohort-raw-7731."),
    assistant("[tool qc_report returned]\n17 samples failed the coverage threshold"),
    user("Sounds good."),
]


def test_llm_keeps_every_kept_fact_whatever_the_model_writes_and_reports_the_drop():
    nonsense = "\n".join(f"- version 0.{i}.{i + 1}" for i in range(40))  # what a 135M model wrote
    summarizer = LlmSummarizer(Reply(nonsense), "tiny")
    text, report = run(summarizer.summarize_with_report(HISTORY, max_tokens=300, encoding=ENC))
    assert count_tokens(text, ENC) <= 300
    for value in ("DeepVariant 1.6", "gs://cohort-raw-7731", "17 samples"):
        assert value in text
    lost = [fact for fact, why in report.dropped if "left out by the model" in why]
    assert any("DeepVariant 1.6" in fact for fact in lost)
    assert len(report.kept) == len(lost)  # the model kept none of them


def test_llm_drops_a_model_line_that_presents_a_superseded_value():
    history = [*HISTORY, user("Actually, pin DeepVariant 1.7 instead.")]
    reply = "## Goal\n- genomics pipeline\n## Decisions and constraints\n- DeepVariant 1.6 pinned"
    text = run(LlmSummarizer(Reply(reply), "tiny").summarize(history, max_tokens=300, encoding=ENC))
    assert "DeepVariant 1.7" in text
    assert "1.6" not in text
    assert "genomics pipeline" in strip_kept_section(text)  # the rest of the reply stays


def test_llm_with_no_room_after_the_ledger_asks_no_model():
    class Refuses(Reply):
        async def stream(self, messages, *, model, max_tokens=None):  # type: ignore[override]
            raise AssertionError("the model was asked")
            yield ""

    text = run(LlmSummarizer(Refuses(""), "tiny").summarize(HISTORY, max_tokens=40, encoding=ENC))
    assert count_tokens(text, ENC) <= 40
    assert text.startswith(f"## {SECTION_KEPT}")
