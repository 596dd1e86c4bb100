"""The ``llm`` summariser: a summary in fixed sections written by the profile's model."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence

from kairox.context.summarizer import SummaryFromReport, SummaryReport
from kairox.context.tokens import count_tokens
from kairox.default_plugins.summarizers.budget import fit_to_budget, kept_facts_first
from kairox.default_plugins.summarizers.common import (
    SECTION_DECISIONS,
    SECTION_GOAL,
    SECTION_MOST_RECENT,
    SECTION_OPEN_QUESTIONS,
    SECTION_TOOLS,
    SummarizerOptionError,
    _format_message,
    _is_user,
)
from kairox.default_plugins.summarizers.kept_facts import (
    Fact,
    Ledger,
    ledger_report,
    strip_kept_section,
)
from kairox.support.models import ChatMessage, ModelBackend, ModelError
from kairox.support.retry import RetryPolicy, async_call_with_retries

_LLM_SECTIONS = (SECTION_GOAL, SECTION_DECISIONS, SECTION_TOOLS, SECTION_OPEN_QUESTIONS)

_LLM_SYSTEM_PROMPT = """\
You compress the oldest part of a conversation between a user and an AI assistant, so \
the conversation can go on without it. Write a summary of at most {target} tokens with \
exactly these Markdown sections, in this order:

{headings}

Rules:
- Keep names, numbers, versions, file paths, identifiers, dates and quoted strings \
exactly as written.
- Goal: what the user wants, including any later change of goal.
- Decisions and constraints: what was decided or agreed, and every requirement, limit \
or prohibition.
- Tool calls and outcomes: each tool that was called and what it returned or why it failed.
- Open questions: questions still unanswered and work still pending.
- Write "- none" under a section with nothing to report.
- Bullet points, no preamble, no closing remarks; do not invent or answer anything."""


def build_llm_prompt(messages: Sequence[ChatMessage], target_tokens: int) -> list[ChatMessage]:
    """The chat messages the ``llm`` summariser sends: instructions, then the transcript."""
    headings = "\n".join(f"## {section}" for section in _LLM_SECTIONS)
    system = _LLM_SYSTEM_PROMPT.format(target=target_tokens, headings=headings)
    transcript = "\n\n".join(
        f"[{number}] {_format_message(message)}" for number, message in enumerate(messages, 1)
    )
    request = (
        f"Summarise these {len(messages)} messages in at most {target_tokens} tokens.\n\n"
        f"<conversation>\n{transcript}\n</conversation>"
    )
    return [ChatMessage("system", system), ChatMessage("user", request)]


Sleep = Callable[[float], Awaitable[None]]
#: Below this many tokens left after the kept facts, the model is not asked at all.
_MIN_MODEL_TOKENS = 24


def _checked_reply(
    reply: str, ledger: Ledger, target: int, encoding: str
) -> tuple[str, list[Fact]]:
    """The model's reply without a kept-facts section of its own or a line presenting a
    superseded value, fitted to ``target``; and the kept facts the reply lost."""
    lines = [
        line
        for line in strip_kept_section(reply.strip()).splitlines()
        if not ledger.holds_stale(line)
    ]
    text = fit_to_budget("\n".join(lines).strip(), target, encoding)
    folded = text.casefold()
    lost = [
        fact
        for fact in ledger.facts
        if not all(d.casefold() in folded for d in fact.details or (fact.text,))
    ]
    return text, lost


class LlmSummarizer(SummaryFromReport):
    """A summary written by the profile's model, in the fixed sections compaction expects.

    :param backend: the :class:`~kairox.support.models.ModelBackend` to call.
    :param model: the model name passed to ``backend.stream``.
    :param retries: how many times a failing call is retried (so ``retries + 1`` calls).
        0 by default: the model backend already retries what a retry can fix
        (:mod:`kairox.support.retry`), and a loop on top of it multiplies the calls.
    :param retry_delay: seconds before the first retry; doubled for each further one.
    :param max_retry_delay: the cap on one pause, so backoff stays bounded.
    :param sleep: the coroutine that waits (tests may replace it).

    The reply is collected from the stream; one that fails part-way, or comes back empty,
    counts as a failure. An over-long reply is cut at a line or sentence boundary. The
    most recent user message is appended verbatim under *Most recent user message* when
    it fits; if it takes at most half the budget, the model is asked for a correspondingly
    shorter summary to make room. After the last retry :class:`ModelError` is raised.
    """

    name = "llm"

    def __init__(
        self,
        backend: ModelBackend | None = None,
        model: str | None = None,
        *,
        retries: int = 0,
        retry_delay: float = 0.5,
        max_retry_delay: float = 4.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if backend is None:
            raise SummarizerOptionError(
                "the llm summarizer needs a model backend; configure the profile's backend"
            )
        if not isinstance(backend, ModelBackend):
            raise SummarizerOptionError(
                "the llm summarizer's backend must be a ModelBackend (a `name` and a "
                f"`stream(messages, *, model, max_tokens)` method), got {backend!r}"
            )
        if not isinstance(model, str) or not model.strip():
            raise SummarizerOptionError(
                f"the llm summarizer needs a model name; set the profile's model (got {model!r})"
            )
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise SummarizerOptionError(
                f"the llm summarizer's retries must be a whole number >= 0, got {retries!r}"
            )
        for option, value in (("retry_delay", retry_delay), ("max_retry_delay", max_retry_delay)):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise SummarizerOptionError(
                    f"the llm summarizer's {option} must be a number of seconds >= 0, got {value!r}"
                )
        self.backend = backend
        self.model = model
        self.retries = retries
        self.retry_delay = float(retry_delay)
        self.max_retry_delay = float(max_retry_delay)
        self._sleep = sleep

    def backoff(self, retry: int) -> float:
        """The pause before retry number ``retry`` (1-based): doubling, capped."""
        return min(self.max_retry_delay, self.retry_delay * 2 ** (retry - 1))

    async def summarize_with_report(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> tuple[str, SummaryReport]:
        """The kept facts (built by rules, whatever the model writes), then the model's
        summary in the budget left; facts the model's text lost are reported."""
        start = kept_facts_first(messages, max_tokens, encoding)
        if start is None:
            return "", SummaryReport()
        ledger, head, room = start
        recent = next((m.content for m in reversed(messages) if _is_user(m)), "")
        block = f"\n\n## {SECTION_MOST_RECENT}\n{recent}" if recent.strip() else ""
        block_cost = count_tokens(block, encoding)
        # Make room for the verbatim message only when it leaves the summary most of the
        # budget; otherwise the summary comes first and the message is added if it fits.
        reserved = block_cost if block and block_cost <= room // 2 else 0
        target = room - reserved
        summary, lost = "", list(ledger.facts)
        if target >= _MIN_MODEL_TOKENS:
            reply = await self._ask(build_llm_prompt(messages, target), max_tokens)
            summary, lost = _checked_reply(reply, ledger, target, encoding)
        if block and count_tokens(summary + block, encoding) <= room:
            summary += block
        text = "\n\n".join(p for p in (head, summary.strip()) if p)
        why = "left out by the model's summary; kept from the kept facts"
        report = ledger_report(ledger, [(fact.text, why) for fact in lost])
        return fit_to_budget(text, max_tokens, encoding), report

    async def _ask(self, prompt: list[ChatMessage], max_tokens: int) -> str:
        """The model's whole reply; with ``retries``, retried on :class:`ModelError` by the
        one retry policy (:mod:`kairox.support.retry`), pausing :meth:`backoff` between calls."""
        attempts = self.retries + 1

        async def once() -> str:
            pieces = [
                piece
                async for piece in self.backend.stream(
                    prompt, model=self.model, max_tokens=max_tokens
                )
            ]
            reply = "".join(pieces)
            if not reply.strip():
                raise ModelError(f"model {self.model!r} returned an empty summary")
            return reply

        policy = RetryPolicy(
            attempts=attempts,
            base_delay=self.retry_delay,
            max_delay=self.max_retry_delay,
            budget=math.inf,
            jitter=0,
        )
        try:
            return await async_call_with_retries(
                once,
                retryable=lambda exc: isinstance(exc, ModelError),
                policy=policy,
                sleep=self._sleep,
            )
        except ModelError as last:
            raise ModelError(
                f"the llm summarizer gave up after {attempts} attempt(s) with model "
                f"{self.model!r}: {last}"
            ) from last
