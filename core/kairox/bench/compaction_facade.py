"""The facade a ``kairox bench compaction`` session runs on, and its summariser timing.

Retrieval is off and the replies are scripted; only the summariser is real (and, for
``llm``, the model it asks). Each summariser call is timed and its result measured
against the budget compaction gave it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kairox.config.loaded import KairoxConfig
from kairox.config.schema import ProfileConfig, RecallConfig, WorkspaceConfig
from kairox.context.summarizer import ReportingSummarizer, SummaryFromReport, SummaryReport
from kairox.context.tokens import count_tokens
from kairox.plugin_host.registry import Registry
from kairox.runtime.facade import AppFacade
from kairox.support.models import ChatMessage, ModelBackend

__all__ = ["SYSTEM_PROMPT", "LlmBackend", "SessionSetup", "bench_facade", "call_figures"]

SYSTEM_PROMPT = "You are a helpful engineering assistant for a software team."


def _profile(summarizer: str, window: int) -> ProfileConfig:
    return ProfileConfig(
        model="scripted",
        backend="scripted",
        context_window=window,
        headroom=window // 8,
        summarizer=summarizer,
        auto_compact=True,
        system_prompt=SYSTEM_PROMPT,
    )


@dataclass(frozen=True)
class LlmBackend:
    """A real model backend for the ``llm`` summariser, and the model name to ask."""

    backend: ModelBackend
    model: str
    label: str


class _Timed(SummaryFromReport):
    """A summariser as the session sees it, timed, its results measured against budget."""

    def __init__(self, inner: Any, calls: list[dict[str, Any]]) -> None:
        self.inner = inner
        self.name = inner.name
        self._calls = calls

    async def summarize_with_report(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> tuple[str, SummaryReport]:
        start = time.perf_counter()
        if isinstance(self.inner, ReportingSummarizer):
            text, report = await self.inner.summarize_with_report(
                messages, max_tokens=max_tokens, encoding=encoding
            )
        else:
            text = await self.inner.summarize(messages, max_tokens=max_tokens, encoding=encoding)
            report = SummaryReport()
        tokens = count_tokens(text, encoding)
        self._calls.append(
            {
                "seconds": time.perf_counter() - start,
                "messages": len(messages),
                "max_tokens": max_tokens,
                "tokens": tokens,
                "model_dropped": sum(1 for _, why in report.dropped if "model" in why),
            }
        )
        return text, report


class _BenchFacade(AppFacade):
    """The facade of one benchmark session: the ``llm`` summariser talks to ``llm``.

    The session's own replies stay scripted; only summaries go to the real model. Every
    summariser call is timed and its result measured against its budget (``calls``).
    """

    def __init__(self, *, llm: LlmBackend | None, **options: Any) -> None:
        super().__init__(**options)
        self._llm = llm
        self.calls: list[dict[str, Any]] = []

    def summarizer(self, name: str, profile: ProfileConfig, backend: ModelBackend | None = None):
        if self._llm is not None:
            # Any summariser that asks a model asks this one (the others ignore it).
            profile = profile.model_copy(update={"model": self._llm.model})
            backend = self._llm.backend
        return _Timed(super().summarizer(name, profile, backend), self.calls)


@dataclass(frozen=True)
class SessionSetup:
    """What one benchmark session runs with: the summariser and context window under test,
    the plugins, its own state folder, and the real model for ``llm`` (if any)."""

    summarizer: str
    window: int
    registry: Registry
    pm: Any
    state_dir: Path
    llm: LlmBackend | None = None


def bench_facade(setup: SessionSetup) -> _BenchFacade:
    """The facade one benchmark session runs on: retrieval and recall off, a scripted
    profile."""
    state_dir = setup.state_dir
    state_dir.mkdir(parents=True, exist_ok=True)
    retrievers = sorted(setup.registry.workspace_retrievers)
    config = KairoxConfig(
        profiles={"default": _profile(setup.summarizer, setup.window)},
        knowledge_bases={},
        # No retrieval: this measures compaction, and the sources stay out of the way.
        workspace=WorkspaceConfig(disabled_retrievers=retrievers),
        files=[],
        workspace_file=None,
        root=state_dir,
        # No recall either: it would bring back what the summary dropped (kairox bench
        # recall measures that); here the summary alone must keep the thread.
        recall=RecallConfig(sessions="none"),
    )
    return _BenchFacade(
        llm=setup.llm, cwd=state_dir, config=config, pm=setup.pm, state_dir=state_dir
    )


def call_figures(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Time per compaction and budget adherence of a session's summariser calls."""
    return {
        "summary_ms": [round(c["seconds"] * 1000, 3) for c in calls],
        "summary_messages": [c["messages"] for c in calls],
        "within_budget": all(c["tokens"] <= c["max_tokens"] for c in calls),
        "budget_use_max": max((c["tokens"] / c["max_tokens"] for c in calls), default=0.0),
        "model_dropped": sum(c["model_dropped"] for c in calls),
    }
