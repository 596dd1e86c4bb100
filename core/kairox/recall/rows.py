"""The archive's messages in memory: texts, vectors and the arrays recall ranks with.

Kept in event-id order and grown as the archive syncs. Besides each message and its vector,
the arrays say for each message its session, its sitting (a session's messages with no more
than :data:`SITTING_GAP` between one and the next), its speaker, and its neighbours in the
session (one and two messages before and after), so that ranking is a handful of numpy
operations over every message, never a Python loop per message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

import numpy as np

from kairox.context.recalled import recall_line
from kairox.context.tokens import get_encoding

__all__ = ["SITTING_GAP", "ArchivedMessage", "MessageRows", "parse_time"]

#: Messages further apart than this start a new sitting.
SITTING_GAP: Final = timedelta(minutes=30)

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class ArchivedMessage:
    """One archived message: who said what, when, in which session."""

    event_id: int
    session_id: str
    role: str
    speaker: str | None
    time: str
    """ISO 8601: when the message was said (its recorded time, else when it was stored)."""
    text: str

    @property
    def who(self) -> str:
        """The speaker's name, else the role (``user``, ``assistant``, ``tool``)."""
        return self.speaker or self.role

    @property
    def tool_output(self) -> bool:
        """Text a tool returned: nobody vetted it (the taint rule of tool output)."""
        return self.role == "tool"


def parse_time(value: str) -> datetime | None:
    """An archived time as a datetime (``None`` when it is not ISO 8601)."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _apart(before: datetime | None, after: datetime | None) -> bool:
    if before is None or after is None:
        return True
    try:
        return abs(after - before) > SITTING_GAP
    except TypeError:  # one aware, one naive: not comparable, so not one sitting
        return True


class MessageRows:
    """This workspace's archived messages, in event-id order, with their vectors.

    Neighbour arrays hold positions, with ``len(self)`` (one past the end) for "none", so
    that ``scores[array]`` works on a score array with one extra zero at the end.
    """

    def __init__(self, dim: int) -> None:
        self.messages: list[ArchivedMessage] = []
        self.position: dict[int, int] = {}  # event id -> position
        self.session_codes: dict[str, int] = {}
        self.speakers_by_word: dict[str, set[int]] = {}  # a word of a name -> speaker codes
        self._speaker_codes: dict[str, int] = {}
        self._session: list[int] = []
        self._speaker: list[int] = []
        self._sitting: list[int] = []
        self._before: list[list[int]] = [[], []]  # one and two messages back (-1: none)
        self._after: list[list[int]] = [[], []]
        self._last: dict[str, tuple[int, datetime | None]] = {}  # session -> position, time
        self._matrix = np.zeros((1024, dim), dtype=np.float32)
        self._arrays: dict[str, np.ndarray] = {}
        self._flags: dict[str, tuple[list[bool], list[bool]]] = {}
        self._line_tokens: dict[str, list[int]] = {}  # encoding -> each message's line
        self.last_id = 0

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def matrix(self) -> np.ndarray:
        """The unit vectors, one row per message."""
        return self._matrix[: len(self.messages)]

    def array(self, name: str) -> np.ndarray:
        """``session``, ``speaker``, ``sitting``, ``before1``, ``before2``, ``after1`` or
        ``after2`` as an int64 array (neighbours: ``len(self)`` for none)."""
        found = self._arrays.get(name)
        if found is None:
            lists = {
                "session": self._session,
                "speaker": self._speaker,
                "sitting": self._sitting,
                "before1": self._before[0],
                "before2": self._before[1],
                "after1": self._after[0],
                "after2": self._after[1],
            }
            found = np.asarray(lists[name], dtype=np.int64)
            if name.startswith(("before", "after")):
                found = np.where(found < 0, len(self.messages), found)
            self._arrays[name] = found
        return found

    def flags(self, short_words: int) -> tuple[list[bool], list[bool]]:
        """Per message: whether it is a short reply (at most ``short_words`` words), and
        whether it asks a question (ends with ``?``)."""
        short, question = self._flags.setdefault(f"flags:{short_words}", ([], []))
        for message in self.messages[len(short) :]:
            short.append(len(message.text.split()) <= short_words)
            question.append(message.text.rstrip().endswith("?"))
        return short, question

    def line_tokens(self, encoding: str, position: int) -> int:
        """Tokens of message ``position``'s prompt line (:func:`recall_line`) in
        ``encoding``; the lines not counted yet are counted together, once."""
        counted = self._line_tokens.setdefault(encoding, [])
        if position >= len(counted):
            lines = [recall_line(m.who, m.text) for m in self.messages[len(counted) :]]
            coded = get_encoding(encoding).encode_ordinary_batch(lines, num_threads=1)
            counted.extend(len(tokens) for tokens in coded)
        return counted[position]

    def add(self, messages: Sequence[ArchivedMessage], vectors: np.ndarray) -> None:
        """Append ``messages`` (newer than every row held) and their unit vectors."""
        start = len(self.messages)
        end = start + len(messages)
        if end > len(self._matrix):
            grown = np.zeros((max(end, 2 * len(self._matrix)), self._matrix.shape[1]), np.float32)
            grown[:start] = self._matrix[:start]
            self._matrix = grown
        self._matrix[start:end] = vectors
        for message in messages:
            self._add(message)
        self._arrays.clear()
        if messages:
            self.last_id = messages[-1].event_id

    def _add(self, message: ArchivedMessage) -> None:
        here = len(self.messages)
        self.position[message.event_id] = here
        self._session.append(
            self.session_codes.setdefault(message.session_id, len(self.session_codes))
        )
        self._speaker.append(self._speaker_code(message.speaker))
        when = parse_time(message.time)
        previous = self._last.get(message.session_id)
        one_back = previous[0] if previous is not None else -1
        two_back = self._before[0][one_back] if one_back >= 0 else -1
        self._before[0].append(one_back)
        self._before[1].append(two_back)
        self._after[0].append(-1)
        self._after[1].append(-1)
        if one_back >= 0:
            self._after[0][one_back] = here
        if two_back >= 0:
            self._after[1][two_back] = here
        fresh = previous is None or _apart(previous[1], when)
        self._sitting.append(here if fresh else self._sitting[one_back])
        self._last[message.session_id] = (here, when)
        self.messages.append(message)

    def _speaker_code(self, speaker: str | None) -> int:
        if not speaker:
            return -1
        code = self._speaker_codes.get(speaker)
        if code is None:
            code = self._speaker_codes[speaker] = len(self._speaker_codes)
            for word in _WORD.findall(speaker.casefold()):
                self.speakers_by_word.setdefault(word, set()).add(code)
        return code

    def named_speakers(self, text: str) -> list[int]:
        """Codes of the speakers with a word of their name in ``text``."""
        found: set[int] = set()
        for word in set(_WORD.findall(text.casefold())):
            found |= self.speakers_by_word.get(word, set())
        return sorted(found)
