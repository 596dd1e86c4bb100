"""The built-in summarisers: extractive, sliding-window and llm (through a test-double backend)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.config.schema import ProfileConfig
from kairox.context.summarizer import Summarizer
from kairox.context.tokens import count_tokens
from kairox.default_plugins import summarizers
from kairox.default_plugins.summarizers import (
    ExtractiveSummarizer,
    LlmSummarizer,
    SlidingWindowSummarizer,
    SummarizerOptionError,
    _extractive_factory,
    _sliding_window_factory,
    fit_to_budget,
)
from kairox.plugin_host.manager import KairoxPluginManager
from kairox.plugin_host.registry import SummarizerContext
from kairox.support.models import ChatMessage, ModelError
from kairox.testing import registered_plugin, run
from tests.default_plugins.summarizer_helpers import (
    ENC,
    HISTORY,
    SUMMARY,
    CannedBackend,
    assistant,
    summarize,
    user,
)

# The goal and tool outcomes live in the kept facts; their sections get only what is left.
EXTRACTIVE_HEADINGS = [
    "## Kept facts",
    "## Decisions and constraints",
    "## Open questions",
    "## Recent user messages",
]


# -- a long history with planted facts ----------------------------------------------------------

FILLER_USER = [
    "Can you tell me more about how this part works?",
    "That sounds reasonable to me.",
    "Let me think about it for a moment.",
    "OK, go on with the next part.",
]
FILLER_ASSISTANT = [
    "Sure, here is a longer explanation of the overall structure and how the pieces fit "
    "together in practice.",
    "We should keep things tidy and readable.",
    "There are several ways to approach this, each with trade-offs.",
    "I will now describe the next part of the design in some detail.",
]
PLANTED = {
    6: assistant("After comparing options we decided to use PostgreSQL 16 for the ledger."),
    14: user("Memory is tight: the worker must not exceed 512 MB."),
    22: assistant("Dr. Alvarez will review the schema before the launch."),
    30: user("The service listens on port 8443 behind the proxy."),
    38: assistant("The entry point lives in src/app/main.py for now."),
    44: ChatMessage("tool", "exit code 0: 212 passed\n" + "noise line\n" * 50, name="run_tests"),
    46: assistant("Do you want CSV or Parquet exports?"),
}
FACTS = [
    "We decided to use PostgreSQL 16",
    "must not exceed 512 MB",
    "Dr. Alvarez",
    "port 8443",
    "src/app/main.py",
]


def long_history() -> list[ChatMessage]:
    messages = [user("I want to build a billing service for the Acme shop, with invoices.")]
    for i in range(1, 70):
        if i in PLANTED:
            messages.append(PLANTED[i])
        elif i % 2:
            messages.append(assistant(" ".join(FILLER_ASSISTANT[(i + j) % 4] for j in range(3))))
        else:
            messages.append(user(FILLER_USER[i % 4]))
    messages.append(user("Please draft the invoice table next."))
    return messages


# -- extractive ---------------------------------------------------------------------------------


def test_extractive_keeps_sections_and_planted_facts_within_a_moderate_budget():
    history = long_history()
    budget = 220
    history_tokens = sum(count_tokens(m.content, ENC) for m in history)
    assert history_tokens > 8 * budget  # the history really has to shrink

    summary = summarize(ExtractiveSummarizer(), history, budget)

    assert count_tokens(summary, ENC) <= budget
    positions = [summary.find(heading) for heading in EXTRACTIVE_HEADINGS]
    assert all(p >= 0 for p in positions), summary
    assert positions == sorted(positions), "sections must come in their fixed order"
    for fact in FACTS:
        assert fact.casefold() in summary.casefold(), f"{fact!r} lost:\n{summary}"
    kept = summary.split("## Decisions")[0]
    assert "- goal: I want to build a billing service for the Acme shop" in kept
    assert "tool: run_tests: exit code 0: 212 passed" in kept
    assert summary.count("212 passed") == 1  # held by the kept facts, not said twice
    assert "noise line" not in summary  # a tool's outcome is its first line only
    assert "Do you want CSV or Parquet exports?" in summary.split("## Open questions")[1]
    assert summary.rstrip().endswith("- Please draft the invoice table next.")
    # filler without a cue or a detail never makes it in
    assert "Let me think about it" not in summary.split("## Recent")[0]


def test_extractive_keeps_facts_in_original_order_in_the_kept_facts():
    summary = summarize(ExtractiveSummarizer(), long_history(), 220)
    kept = summary.split("## Kept facts")[1].split("## ")[0].casefold()
    found = [kept.find(f.casefold()) for f in FACTS]
    assert all(i >= 0 for i in found)
    assert found == sorted(found)


def test_extractive_collects_goal_changes_and_drops_answered_questions():
    history = [
        user("Hi."),
        user("Build me a CLI that renames photos by date."),
        assistant("Which date should it use, EXIF or file mtime?"),
        user("Use the EXIF date, never the file mtime."),
        assistant("Understood."),
        user("Actually, I want it to also handle videos instead of only photos."),
        assistant("Should videos go to a separate folder?"),
        user("Thanks."),
    ]
    summary = summarize(ExtractiveSummarizer(), history, 400)
    goals = [line for line in summary.splitlines() if line.startswith("- goal: ")]
    assert any("renames photos by date" in line for line in goals)
    assert any("handle videos instead" in line for line in goals)
    questions = summary.split("## Open questions")[1].split("## ")[0]
    assert "separate folder" in questions
    assert "EXIF or file mtime" not in summary  # answered by the next user message
    assert "Use the EXIF date, never the file mtime." in summary


def test_extractive_tool_section_names_the_tool_and_clips_its_outcome():
    history = [
        user("Check the build status of the main branch please."),
        assistant("I called the ci_status tool for the main branch."),
        ChatMessage("tool", "FAILED: " + "x" * 1000, name="ci_status"),
        ChatMessage("tool", "", name="noop"),
        ChatMessage(
            "tool",
            "Traceback (most recent call last):\n  File x\nKeyError: 'invoice_id'\n",
            name="db_query",
        ),
    ]
    summary = summarize(ExtractiveSummarizer(), history, 300)
    # Tool outcomes are kept facts: the ledger holds them, each said once.
    assert "I called the ci_status tool" in summary
    assert summary.count("ci_status: FAILED: ") == 1
    assert "noop: (no output)" in summary
    assert "db_query: KeyError: 'invoice_id'" in summary  # the error, not "Traceback"
    assert "Traceback" not in summary
    assert "x" * 200 not in summary


def test_extractive_does_not_split_abbreviations_or_initials():
    history = [
        user("Set up the new reporting job for finance."),
        assistant("Dr. Alvarez and J. Smith agreed, e.g. weekly runs on Monday at 9 am."),
    ]
    summary = summarize(ExtractiveSummarizer(), history, 200)
    assert "- Dr. Alvarez and J. Smith agreed, e.g. weekly runs on Monday at 9 am." in summary


@pytest.mark.parametrize(
    "messages",
    [[], [user("")], [user("   \n "), ChatMessage("tool", "", name="t")]],
)
def test_extractive_empty_input_gives_an_empty_summary(messages):
    assert summarize(ExtractiveSummarizer(), messages, 100) == ""


@pytest.mark.parametrize("budget", [-3, 0, 1, 2, 5, 10])
def test_extractive_tiny_budgets_never_overflow(budget):
    summary = summarize(ExtractiveSummarizer(), long_history(), budget)
    assert count_tokens(summary, ENC) <= max(budget, 0)


def test_extractive_rejects_a_bad_encoding():
    with pytest.raises(ValueError, match="unknown tiktoken encoding"):
        run(ExtractiveSummarizer().summarize([user("hi")], max_tokens=50, encoding="nope"))


def test_extractive_is_the_same_in_every_process():
    """No set or dict ordering leaks into the output: other hash seeds, same summary."""
    script = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.default_plugins.test_summarizers import long_history, ENC\n"
        "from kairox.default_plugins.summarizers import ExtractiveSummarizer\n"
        "print(ExtractiveSummarizer().summarize_sync(long_history(), max_tokens=150, "
        "encoding=ENC), end='')\n"
    )
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script, here],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        outputs.add(result.stdout)
    local = ExtractiveSummarizer().summarize_sync(long_history(), max_tokens=150, encoding=ENC)
    assert outputs == {local}


WORDS = st.sampled_from(
    [
        "we", "decided", "must", "not", "use", "PostgreSQL", "16", "port", "8443", "the",
        "Dr.", "Alvarez", "src/app/main.py", "`config.toml`", "2024-05-01", "never", "budget",
        "?", ".", "!", "\n", "- ", "snake_case", "camelCase", "Q3", "Friday", '"quoted"',
        "e.g.", "call", "tool", "actually", "I want", "日本語", "🚀", "  ",
    ]
)  # fmt: skip
CONTENT = st.one_of(
    st.text(max_size=300),
    st.lists(WORDS, max_size=60).map(" ".join),
)
MESSAGES = st.lists(
    st.builds(
        ChatMessage,
        role=st.sampled_from(["system", "user", "assistant", "tool"]),
        content=CONTENT,
        name=st.one_of(st.none(), st.sampled_from(["run_tests", "search"])),
    ),
    max_size=25,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=MESSAGES, max_tokens=st.integers(min_value=20, max_value=600))
def test_extractive_property_fits_and_is_deterministic(messages, max_tokens):
    first = summarize(ExtractiveSummarizer(), messages, max_tokens)
    assert count_tokens(first, ENC) <= max_tokens
    assert summarize(ExtractiveSummarizer(), list(messages), max_tokens) == first


# -- sliding window -----------------------------------------------------------------------------


def test_sliding_window_keeps_the_newest_whole_messages_in_order():
    history = [user(f"message number {i} " + "word " * 20) for i in range(30)]
    summary = summarize(SlidingWindowSummarizer(), history, 120)
    assert count_tokens(summary, ENC) <= 120
    match = re.match(r"\[sliding window: (\d+) earlier messages dropped\]", summary)
    assert match, summary
    dropped = int(match.group(1))
    assert 0 < dropped < 30
    kept = history[dropped:]
    assert summary == "\n\n".join([match.group(0), *(f"user: {m.content}" for m in kept)])
    assert history[-1].content in summary


def test_sliding_window_with_everything_fitting_drops_nothing():
    history = [user("hello"), ChatMessage("tool", "42 rows", name="sql"), assistant("done")]
    summary = summarize(SlidingWindowSummarizer(), history, 500)
    assert summary == (
        "[sliding window: 0 earlier messages dropped]\n\n"
        "user: hello\n\ntool (sql): 42 rows\n\nassistant: done"
    )


def test_sliding_window_never_keeps_part_of_a_message():
    history = [user("short"), assistant("long " * 500)]
    summary = summarize(SlidingWindowSummarizer(), history, 60)
    assert summary == "[sliding window: 2 earlier messages dropped]"


@pytest.mark.parametrize("budget", [-1, 0])
def test_sliding_window_empty_cases(budget):
    assert summarize(SlidingWindowSummarizer(), [], 100) == ""
    assert summarize(SlidingWindowSummarizer(), [user("hi")], budget) == ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=MESSAGES, max_tokens=st.integers(min_value=-5, max_value=600))
def test_sliding_window_property_never_raises_never_overflows_keeps_a_tail(messages, max_tokens):
    summary = summarize(SlidingWindowSummarizer(), messages, max_tokens)
    assert count_tokens(summary, ENC) <= max(max_tokens, 0)
    if not messages or max_tokens < 20:
        return
    match = re.match(r"\[sliding window: (\d+) earlier messages dropped\]", summary)
    assert match, summary
    kept = messages[int(match.group(1)) :]
    assert summary == "\n\n".join([match.group(0), *(summarizers._format_message(m) for m in kept)])


# -- fit_to_budget --------------------------------------------------------------------------------


def test_fit_to_budget_cuts_at_a_line_or_sentence_boundary():
    text = "## Goal\n- First fact is 1. Second fact is 2.\n- Third line here.\n" * 20
    fitted = fit_to_budget(text, 30, ENC)
    assert count_tokens(fitted, ENC) <= 30
    assert text.startswith(fitted)
    assert fitted.endswith((".", "Goal"))


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=500), max_tokens=st.integers(min_value=-2, max_value=80))
def test_fit_to_budget_property(text, max_tokens):
    fitted = fit_to_budget(text, max_tokens, ENC)
    assert count_tokens(fitted, ENC) <= max(max_tokens, 0)
    assert text.startswith(fitted)


# -- registration -----------------------------------------------------------------------------------


def test_all_three_register_through_the_hook():
    pm = KairoxPluginManager()
    with registered_plugin(summarizers, "summarizers", pm):
        assert not pm.failures()
        table = pm.registry.summarizers
        assert sorted(table) == ["extractive", "llm", "sliding-window"]
        assert table.provider("extractive") == "summarizers"
        backend = CannedBackend()
        ctx = SummarizerContext(profile=ProfileConfig(model="m"), model_backend=lambda: backend)
        built = [table[name].factory(ctx) for name in ("extractive", "sliding-window", "llm")]
    assert (built[2].backend, built[2].model) == (backend, "m")
    for summarizer, name in zip(built, ["extractive", "sliding-window", "llm"], strict=True):
        assert isinstance(summarizer, Summarizer)
        assert summarizer.name == name


def test_the_llm_summarizer_stacks_no_retries_on_the_backend_by_default():
    # The backend retries what a retry can fix (kairox.support.retry); a failing summary call
    # is one call, not (backend attempts) x (summariser attempts).
    backend = CannedBackend(ModelError("503 after the backend's own retries"), SUMMARY)
    with pytest.raises(ModelError, match="after 1 attempt"):
        summarize(LlmSummarizer(backend, "test-model"), HISTORY, 300)
    assert len(backend.calls) == 1


@pytest.mark.parametrize("name", ["extractive", "sliding-window"])
def test_option_free_summarizers_reject_options(name):
    factory = {"extractive": _extractive_factory, "sliding-window": _sliding_window_factory}[name]
    with pytest.raises(SummarizerOptionError, match="takes no options; got model"):
        factory(model="m")


def test_extractive_keeps_a_carried_summary_ahead_of_new_detail():
    from kairox.default_plugins.summarizers import CARRIED_SUMMARY, ExtractiveSummarizer
    from kairox.support.models import ChatMessage as Message

    earlier = "## Decisions and constraints\n- We decided to use PostgreSQL 16 on port 8443."
    chatter = [
        Message("user", f"Ticket KX-{n}00 touches src/mod{n}.py on host db-{n} at 10.0.0.{n}.")
        for n in range(40)
    ]
    summary = run(
        ExtractiveSummarizer().summarize(
            [Message("assistant", earlier, name=CARRIED_SUMMARY), *chatter],
            max_tokens=120,
            encoding="o200k_base",
        )
    )
    assert "PostgreSQL 16 on port 8443" in summary
    assert "## Decisions and constraints" in summary
