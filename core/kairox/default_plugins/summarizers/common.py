"""What every built-in summariser shares: section headings, the carried-summary name,
the option error, how a message is shown and how a long line is clipped."""

from __future__ import annotations

from kairox.support.errors import KairoxError
from kairox.support.models import ChatMessage

SECTION_GOAL = "Goal"
SECTION_DECISIONS = "Decisions and constraints"
SECTION_TOOLS = "Tool calls and outcomes"
SECTION_OPEN_QUESTIONS = "Open questions"
SECTION_RECENT = "Recent user messages"
#: The heading the ``llm`` summariser puts the last user message under.
SECTION_MOST_RECENT = "Most recent user message"
#: The ``name`` of a message that carries an earlier summary (see kairox.runtime.session).
CARRIED_SUMMARY = "summary"


class SummarizerOptionError(KairoxError, ValueError):
    """A summariser was configured with a missing, unknown or invalid option."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, marked with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip() + " …"


def _format_message(message: ChatMessage) -> str:
    label = f"{message.role} ({message.name})" if message.name else message.role
    return f"{label}: {message.content}"


def _is_user(message: ChatMessage) -> bool:
    return message.role == "user"
