"""The llm summariser, through a test-double model backend: its prompt, retries, budget."""

from __future__ import annotations

import re

import pytest

from kairox.context.tokens import count_tokens
from kairox.default_plugins import summarizers
from kairox.default_plugins.summarizers import (
    LlmSummarizer,
    SummarizerOptionError,
    build_llm_prompt,
)
from kairox.default_plugins.summarizers.kept_facts import strip_kept_section
from kairox.support.models import ModelBackend, ModelError
from tests.default_plugins.summarizer_helpers import (
    ENC,
    HEADINGS,
    HISTORY,
    SUMMARY,
    CannedBackend,
    summarize,
    user,
)

# -- llm --------------------------------------------------------------------------------------------


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
