"""The ``sliding-window`` summariser: the newest whole messages that fit; compaction's fallback."""

from __future__ import annotations

from collections.abc import Sequence

from kairox.context.tokens import count_tokens
from kairox.default_plugins.summarizers.budget import _check_budget, fit_to_budget
from kairox.default_plugins.summarizers.common import _format_message
from kairox.support.models import ChatMessage


def _window_marker(dropped: int) -> str:
    return f"[sliding window: {dropped} earlier messages dropped]"


class SlidingWindowSummarizer:
    """The newest whole messages that fit, behind ``[sliding window: N earlier messages
    dropped]``.

    Messages are taken newest first while they fit and emitted in their original order as
    ``role: content``; the kept ones are always a contiguous tail of the history. This is
    also compaction's fallback when another summariser fails, so it makes no model call
    and returns ``""`` rather than failing on an empty history or a non-positive budget.
    """

    name = "sliding-window"

    async def summarize(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> str:
        return self.summarize_sync(messages, max_tokens=max_tokens, encoding=encoding)

    def summarize_sync(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> str:
        """The window, computed synchronously (it never waits on anything)."""
        _check_budget(max_tokens)
        if max_tokens <= 0 or not messages:
            return ""
        # Price the marker with the largest count it can show; should a smaller count ever
        # cost more, the exact check below corrects the estimate.
        used = count_tokens(_window_marker(len(messages)), encoding)
        kept: list[str] = []
        for message in reversed(messages):
            block = _format_message(message)
            cost = count_tokens(f"\n\n{block}", encoding)
            if used + cost > max_tokens:
                break
            kept.append(block)
            used += cost
        kept.reverse()
        text = "\n\n".join([_window_marker(len(messages) - len(kept)), *kept])
        while kept and count_tokens(text, encoding) > max_tokens:
            kept.pop(0)  # the estimate was a token short: drop the oldest kept message
            text = "\n\n".join([_window_marker(len(messages) - len(kept)), *kept])
        return fit_to_budget(text, max_tokens, encoding)
