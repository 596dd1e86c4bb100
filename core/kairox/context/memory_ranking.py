"""Which memories a prompt gets first: key match, then recency, then scope.

:class:`PreparedMemories` does the part that does not depend on the prompt once (render,
count, rank by recency and scope); the assembler keeps it between turns and asks it for
each prompt's order (:meth:`PreparedMemories.ranked`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kairox.context.system_message import Piece
    from kairox.memory.store import MemoryRecord

__all__ = ["SCOPE_PRIORITY", "PreparedMemories", "memory_label", "timestamp", "words"]

# When memories must be filtered, a tie on key match and recency goes to the narrower scope:
# a session memory is about this very conversation, a user memory about every conversation.
SCOPE_PRIORITY = {"session": 2, "workspace": 1, "user": 0}
# Words of a memory key or prompt: runs of letters and digits. Keys are normalised to
# [a-z0-9._-], so "preferred.language" has the words "preferred" and "language".
_WORD = re.compile(r"[^\W_]+")
# One-letter words ("a", "x", "2") match almost any prompt and say nothing about relevance.
_MIN_KEY_WORD_LENGTH = 2
_EPOCH = datetime.min.replace(tzinfo=UTC)


def words(text: str) -> set[str]:
    """The words of a key or prompt that count for key match."""
    return {w for w in _WORD.findall(text.casefold()) if len(w) >= _MIN_KEY_WORD_LENGTH}


def timestamp(value: str | None) -> datetime:
    """``updated_at`` as an aware datetime; unparsable values sort as oldest."""
    if not value:
        return _EPOCH
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return _EPOCH
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def memory_label(memory: MemoryRecord) -> str:
    """How the trace names a memory: ``memory 3 (preferred.language)``."""
    return f"memory {memory.id}" + (f" ({memory.key})" if memory.key else "")


class PreparedMemories:
    """One turn's memories made ready for any prompt (see the assembler's ``_add_memories``).

    ``base`` holds the approved memories as ``(section, piece)`` by recency, then scope,
    then id, best first; the prompt's key match only moves the memories it matches to the
    front (:meth:`ranked`). ``cost`` is what all of them take together in the system
    message, headings included (not the opening cost, which depends on what came first).
    """

    def __init__(
        self,
        memories: Sequence[MemoryRecord],
        make_piece: Callable[[int, str, str], Piece],
        headings: Mapping[str, tuple[str, int]],
    ) -> None:
        self.not_approved: list[tuple[str, str]] = []
        entries: list[tuple[tuple[float, int, int], str, Piece, frozenset[str]]] = []
        for order, memory in enumerate(memories):
            if memory.scope not in SCOPE_PRIORITY:
                raise ValueError(f"memory {memory.id} has an unknown scope {memory.scope!r}")
            source = f"memory:{memory.scope}"
            if memory.status != "approved":
                self.not_approved.append((source, memory_label(memory)))
                continue
            text = f"- {memory.key}: {memory.body}\n" if memory.key else f"- {memory.body}\n"
            rank = (
                timestamp(memory.updated_at).timestamp(),
                SCOPE_PRIORITY[memory.scope],
                memory.id,
            )
            made = make_piece(order, text, memory_label(memory))
            entries.append((rank, source, made, frozenset(words(memory.key or ""))))
        entries.sort(key=lambda e: e[0], reverse=True)
        self.base = [(source, piece) for _, source, piece, _ in entries]
        self.by_word: dict[str, list[int]] = {}
        for position, (_, _, _, key_words) in enumerate(entries):
            for word in key_words:
                self.by_word.setdefault(word, []).append(position)
        sections = {source for source, _ in self.base}
        self.cost = sum(piece.tokens for _, piece in self.base)
        self.cost += sum(headings[source][1] for source in sections)

    def ranked(self, prompt_words: set[str]) -> list[tuple[str, Piece]]:
        """Best first: key match (words of the key in the prompt), then the base order."""
        matches: dict[int, int] = {}
        for word in prompt_words:
            for position in self.by_word.get(word, ()):
                matches[position] = matches.get(position, 0) + 1
        if not matches:
            return self.base
        front = sorted(matches, key=lambda position: (-matches[position], position))
        base = self.base
        return [base[p] for p in front] + [e for p, e in enumerate(base) if p not in matches]
