"""The built-in summarisers: extractive, sliding-window and llm (through a test-double backend)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence

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
    build_llm_prompt,
    fit_to_budget,
)
from kairox.default_plugins.summarizers.kept_facts import strip_kept_section
from kairox.plugin_host.manager import KairoxPluginManager
from kairox.plugin_host.registry import SummarizerContext
from kairox.support.models import ChatMessage, ModelBackend, ModelError
from kairox.testing import registered_plugin, run

ENC = "o200k_base"
HEADINGS = [
    "## Goal",
    "## Decisions and constraints",
    "## Tool calls and outcomes",
    "## Open questions",
    "## Recent user messages",
]


# The goal and tool outcomes live in the kept facts; their sections get only what is left.
EXTRACTIVE_HEADINGS = [
    "## Kept facts",
    "## Decisions and constraints",
    "## Open questions",
    "## Recent user messages",
]


def user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage("assistant", text)


def summarize(summarizer: Summarizer, messages: Sequence[ChatMessage], max_tokens: int) -> str:
    return run(summarizer.summarize(messages, max_tokens=max_tokens, encoding=ENC))


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
        "from test_summarizers import long_history, ENC\n"
        "from kairox.default_plugins.summarizers import ExtractiveSummarizer\n"
        "print(ExtractiveSummarizer().summarize_sync(long_history(), max_tokens=150, "
        "encoding=ENC), end='')\n"
    )
    here = os.path.dirname(__file__)
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


# -- llm --------------------------------------------------------------------------------------------


class CannedBackend:
    """A ``ModelBackend`` test double: each call plays the next scripted reply.

    A reply is a string (streamed in small pieces), an exception (raised before any
    text), or a ``(text, exception)`` pair (raised part-way through the stream). The last
    reply repeats once the script runs out.
    """

    name = "canned"

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatMessage], str, int | None]] = []

    async def stream(
        self, messages: Sequence[ChatMessage], *, model: str, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        self.calls.append((list(messages), model, max_tokens))
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        error = None
        if isinstance(reply, tuple):
            reply, error = reply
        for start in range(0, len(reply), 7):
            yield reply[start : start + 7]
        if error is not None:
            raise error


SUMMARY = (
    "## Goal\n- Build a billing service for Acme.\n"
    "## Decisions and constraints\n- PostgreSQL 16; worker must not exceed 512 MB.\n"
    "## Tool calls and outcomes\n- none\n"
    "## Open questions\n- CSV or Parquet exports?"
)
HISTORY = [
    user("I want to build a billing service for the Acme shop."),
    assistant("We decided to use PostgreSQL 16."),
    ChatMessage("tool", "ok", name="migrate"),
    user("Keep the worker under 512 MB."),
    assistant("Noted."),
]


def llm(backend: CannedBackend, **options: object) -> LlmSummarizer:
    options.setdefault("retry_delay", 0)
    return LlmSummarizer(backend, "test-model", **options)  # type: ignore[arg-type]


def test_canned_backend_is_a_model_backend():
    assert isinstance(CannedBackend(), ModelBackend)


def test_llm_uses_the_backend_text_and_appends_the_most_recent_user_message():
    backend = CannedBackend(SUMMARY)
    summary = summarize(llm(backend), HISTORY, 300)
    # The kept facts come first, built by rules whatever the model writes; then the reply.
    assert summary.startswith("## Kept facts\n- goal: I want to build a billing service")
    assert strip_kept_section(summary) == (
        SUMMARY + "\n\n## Most recent user message\nKeep the worker under 512 MB."
    )
    assert count_tokens(summary, ENC) <= 300
    assert len(backend.calls) == 1


def test_llm_prompt_has_the_fixed_sections_the_messages_and_the_budget():
    backend = CannedBackend(SUMMARY)
    summary = summarize(llm(backend), HISTORY, 300)
    prompt, model, max_tokens = backend.calls[0]
    assert model == "test-model"
    assert max_tokens == 300
    system, request = prompt[0].content, prompt[1].content
    for heading in HEADINGS[:4]:
        assert heading in system
    assert "exactly as written" in system  # names and numbers kept exact
    for message in HISTORY:
        assert message.content in request
    assert "tool (migrate): ok" in request
    # the kept facts and the verbatim message are reserved out of the model's budget
    reserved = count_tokens("\n\n## Most recent user message\nKeep the worker under 512 MB.", ENC)
    kept = count_tokens(summary[: summary.index("## Goal")], ENC)
    assert f"at most {300 - kept - reserved} tokens" in system
    assert build_llm_prompt(HISTORY, 300 - kept - reserved) == prompt


def test_llm_retries_then_succeeds():
    backend = CannedBackend(
        ModelError("HTTP 503"), ("## Goal\n- half", ModelError("reset")), SUMMARY
    )
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    summarizer = llm(backend, retries=2, retry_delay=0.25, max_retry_delay=0.4, sleep=sleep)
    summary = summarize(summarizer, HISTORY, 300)
    assert strip_kept_section(summary).startswith(SUMMARY)
    assert "half" not in summary  # a reply that failed part-way is discarded
    assert len(backend.calls) == 3
    assert pauses == [0.25, 0.4]  # doubling, capped


def test_llm_raises_after_the_retries():
    backend = CannedBackend(ModelError("HTTP 500 from http://localhost:8000"))
    with pytest.raises(ModelError, match=r"gave up after 3 attempt\(s\).*HTTP 500") as caught:
        summarize(llm(backend, retries=2), HISTORY, 300)
    assert len(backend.calls) == 3
    assert isinstance(caught.value.__cause__, ModelError)


def test_llm_with_no_retries_calls_once():
    backend = CannedBackend(ModelError("down"))
    with pytest.raises(ModelError):
        summarize(llm(backend, retries=0), HISTORY, 300)
    assert len(backend.calls) == 1


def test_llm_empty_reply_counts_as_a_failure():
    backend = CannedBackend("  \n", SUMMARY)
    assert strip_kept_section(summarize(llm(backend, retries=1), HISTORY, 300)).startswith(SUMMARY)
    assert len(backend.calls) == 2
    with pytest.raises(ModelError, match="empty summary"):
        summarize(llm(CannedBackend("")), HISTORY, 300)


def test_llm_does_not_retry_a_bug():
    backend = CannedBackend(KeyError("oops"))
    with pytest.raises(KeyError):
        summarize(llm(backend), HISTORY, 300)
    assert len(backend.calls) == 1


def test_llm_truncates_an_over_long_reply_at_a_boundary():
    lines = [f"- Fact number {i} is about item {i * 7}." for i in range(200)]
    reply = "## Goal\n" + "\n".join(lines)
    history = [*HISTORY, user("x " * 400)]  # too long to append
    summary = summarize(llm(CannedBackend(reply)), history, 300)
    assert count_tokens(summary, ENC) <= 300
    body = strip_kept_section(summary)
    assert reply.startswith(body)
    assert body.endswith(".")
    # the longest whole-line prefix that fits what the kept facts leave: one more would not
    target = 300 - count_tokens(summary[: summary.index("## Goal")], ENC)
    next_line = reply.index("\n", len(body) + 1)
    assert count_tokens(reply[:next_line], ENC) > target


def test_llm_appends_the_recent_message_only_when_it_fits():
    huge = "y " * 300
    summary = summarize(llm(CannedBackend(SUMMARY)), [*HISTORY, user(huge)], 100)
    assert "Most recent user message" not in summary
    assert count_tokens(summary, ENC) <= 100


def test_llm_empty_history_or_budget_makes_no_call():
    backend = CannedBackend(SUMMARY)
    assert summarize(llm(backend), [], 100) == ""
    assert summarize(llm(backend), HISTORY, 0) == ""
    assert backend.calls == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "the llm summarizer needs a model backend; configure the profile's backend"),
        ({"backend": None, "model": "m"}, "needs a model backend"),
        ({"backend": object(), "model": "m"}, "must be a ModelBackend"),
        ({"backend": CannedBackend(), "model": ""}, "needs a model name"),
        ({"backend": CannedBackend()}, "needs a model name"),
        ({"backend": CannedBackend(), "model": "m", "retries": -1}, "retries"),
        ({"backend": CannedBackend(), "model": "m", "retries": True}, "retries"),
        ({"backend": CannedBackend(), "model": "m", "retry_delay": "fast"}, "retry_delay"),
        ({"backend": CannedBackend(), "model": "m", "max_retry_delay": -1.0}, "max_retry_delay"),
        ({"backend": CannedBackend(), "model": "m", "temperature": 0}, "unknown option"),
    ],
)
def test_llm_options_are_validated_with_clear_errors(options, message):
    with pytest.raises(SummarizerOptionError, match=re.escape(message)):
        summarizers._llm_factory(**options)


def test_llm_backoff_is_bounded():
    summarizer = LlmSummarizer(CannedBackend(), "m", retry_delay=1, max_retry_delay=3)
    assert [summarizer.backoff(n) for n in range(1, 6)] == [1, 2, 3, 3, 3]


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
