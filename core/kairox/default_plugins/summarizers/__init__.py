"""The built-in history summarisers compaction uses: ``extractive``, ``sliding-window``, ``llm``.

All three implement :class:`kairox.context.summarizer.Summarizer` and return text of at most
``max_tokens`` tokens, counted with :func:`kairox.context.tokens.count_tokens` in the
profile's encoding; every result passes through one final fitting step so that promise holds
whatever the input.

* ``extractive`` (the default) needs no model. It sorts the sentences of the history into
  fixed sections (goal; decisions and constraints; tool calls and outcomes; open questions;
  recent user messages), scores them by how likely a later question is to ask about them
  (numbers, proper names, quoted strings, paths, identifiers, dates, decision cues) and
  keeps the best that fit, in their original order. Same input, same output.
* ``sliding-window`` keeps the newest whole messages that fit behind a marker saying how many
  were dropped. Compaction falls back to it when another summariser keeps failing, so it has
  no failure mode of its own.
* ``llm`` asks the profile's :class:`~kairox.support.models.ModelBackend` for a summary with the same
  fixed sections, retries a failing model with bounded backoff, trims an over-long reply at
  a line or sentence boundary, and appends the most recent user message verbatim when the
  budget allows. When the model keeps failing it raises :class:`~kairox.support.models.ModelError`
  and compaction falls back to the sliding window.

This package holds one summariser per module (:mod:`.extractive`, :mod:`.sliding_window`,
:mod:`.llm`), the budget fitting they share (:mod:`.budget`), the *Kept facts* ledger
(:mod:`.kept_facts`) and the shared names (:mod:`.common`); this module registers them.
"""

from __future__ import annotations

from typing import Any

from kairox.default_plugins.summarizers.budget import fit_to_budget
from kairox.default_plugins.summarizers.common import (
    CARRIED_SUMMARY,
    SECTION_DECISIONS,
    SECTION_GOAL,
    SECTION_MOST_RECENT,
    SECTION_OPEN_QUESTIONS,
    SECTION_RECENT,
    SECTION_TOOLS,
    SummarizerOptionError,
)
from kairox.default_plugins.summarizers.common import (
    _format_message as _format_message,  # the tests show messages the same way
)
from kairox.default_plugins.summarizers.extractive import ExtractiveSummarizer
from kairox.default_plugins.summarizers.llm import LlmSummarizer, Sleep, build_llm_prompt
from kairox.default_plugins.summarizers.sliding_window import SlidingWindowSummarizer
from kairox.plugin_host.registry import SummarizerContext, SummarizerSpec, registers

__all__ = [
    "CARRIED_SUMMARY",
    "SECTION_DECISIONS",
    "SECTION_GOAL",
    "SECTION_MOST_RECENT",
    "SECTION_OPEN_QUESTIONS",
    "SECTION_RECENT",
    "SECTION_TOOLS",
    "ExtractiveSummarizer",
    "LlmSummarizer",
    "Sleep",
    "SlidingWindowSummarizer",
    "SummarizerOptionError",
    "build_llm_prompt",
    "fit_to_budget",
    "kairox_register_summarizers",
]


def _no_options(name: str, options: dict[str, Any]) -> None:
    if options:
        raise SummarizerOptionError(
            f"the {name} summarizer takes no options; got {', '.join(sorted(options))}"
        )


def _extractive_factory(**options: Any) -> ExtractiveSummarizer:
    _no_options("extractive", options)
    return ExtractiveSummarizer()


def _sliding_window_factory(**options: Any) -> SlidingWindowSummarizer:
    _no_options("sliding-window", options)
    return SlidingWindowSummarizer()


_LLM_OPTIONS = ("backend", "model", "retries", "retry_delay", "max_retry_delay", "sleep")


def _llm_factory(**options: Any) -> LlmSummarizer:
    unknown = sorted(set(options) - set(_LLM_OPTIONS))
    if unknown:
        raise SummarizerOptionError(
            f"unknown option(s) for the llm summarizer: {', '.join(unknown)}; "
            f"known: {', '.join(_LLM_OPTIONS)}"
        )
    return LlmSummarizer(**options)


def _extractive_from_profile(ctx: SummarizerContext) -> ExtractiveSummarizer:
    return ExtractiveSummarizer()


def _sliding_window_from_profile(ctx: SummarizerContext) -> SlidingWindowSummarizer:
    return SlidingWindowSummarizer()


def _llm_from_profile(ctx: SummarizerContext) -> LlmSummarizer:
    return LlmSummarizer(backend=ctx.model_backend(), model=ctx.profile.model)


kairox_register_summarizers = registers(
    SummarizerSpec(
        name="extractive",
        factory=_extractive_from_profile,
        description="Deterministic extractive summary in fixed sections; no model.",
    ),
    SummarizerSpec(
        name="sliding-window",
        factory=_sliding_window_from_profile,
        description="Keeps the newest whole messages that fit; never fails.",
    ),
    SummarizerSpec(
        name="llm",
        factory=_llm_from_profile,
        description="Summary by the profile's model (its backend retries).",
    ),
)
