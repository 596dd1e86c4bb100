"""Reading LoCoMo-format files: conversations of dated sessions, questions with evidence.

The format (Maharana et al., ACL 2024; ``snap-research/LoCoMo``): a JSON list of items,
each with ``sample_id``, a ``conversation`` (``speaker_a``, ``speaker_b``, ``session_<n>``
lists of turns ``{"speaker", "dia_id", "text", "blip_caption"?}`` and
``session_<n>_date_time`` such as ``"1:56 pm on 8 May, 2023"``) and ``qa`` (``question``,
``category``, ``evidence``: the ``dia_id`` of each turn that holds the answer). A turn
becomes one message: the speaker's name, the session's time, the text with a shared
image's caption after it (``[image: ...]``), as a transcript would show it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["Conversation", "LocomoError", "Question", "Turn", "load_locomo"]

# Evidence ids as written: "D1:3", a few "D:1:3" or "D1:03", some joined with ";" or spaces.
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION = re.compile(r"session_(\d+)")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")


class LocomoError(ValueError):
    """The file is not in LoCoMo's format; the message says where."""


@dataclass(frozen=True)
class Turn:
    """One turn: its id in the file, who said it, what (with any image caption), when."""

    dia_id: str
    speaker: str
    text: str
    time: str | None

    @property
    def line(self) -> str:
        """The turn as a transcript line: ``speaker: text``."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    """A question with its category and the turns that hold its answer."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One conversation's turns in order and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def _time(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    for form in _DATE_FORMATS:
        try:
            return datetime.strptime(value.strip(), form).isoformat()
        except ValueError:
            continue
    return None


def _turns(conversation: dict[str, Any], where: str) -> list[Turn]:
    numbers = sorted(
        int(match.group(1))
        for key in conversation
        if (match := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
    )
    turns = []
    for number in numbers:
        when = _time(conversation.get(f"session_{number}_date_time"))
        for index, raw in enumerate(conversation[f"session_{number}"]):
            try:
                text = str(raw["text"])
                if raw.get("blip_caption"):
                    text += f" [image: {raw['blip_caption']}]"
                turns.append(Turn(str(raw["dia_id"]), str(raw["speaker"]), text, when))
            except (KeyError, TypeError):
                raise LocomoError(
                    f"{where}: session_{number} turn {index + 1} needs speaker, dia_id and text"
                ) from None
    return turns


def _evidence(raw: Any, known: set[str]) -> tuple[str, ...]:
    found = _EVIDENCE.findall(" ".join(map(str, raw)) if isinstance(raw, list) else str(raw))
    ids = (f"D{session}:{turn}" for session, turn in found)
    return tuple(dict.fromkeys(i for i in ids if i in known))


def load_locomo(path: Path) -> list[Conversation]:
    """The conversations of a LoCoMo-format JSON file, in file order.

    :raises LocomoError: when the file is not a list of LoCoMo items.
    """
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LocomoError(f"cannot read {path}: {exc}") from None
    if not isinstance(items, list):
        raise LocomoError(f"{path}: expected a JSON list of conversations")
    out = []
    for position, item in enumerate(items, start=1):
        where = f"{path} item {position}"
        try:
            conversation = item["conversation"]
            speakers = (str(conversation["speaker_a"]), str(conversation["speaker_b"]))
            qa = item.get("qa", [])
        except (KeyError, TypeError):
            raise LocomoError(f"{where}: needs conversation.speaker_a and speaker_b") from None
        turns = _turns(conversation, where)
        known = {turn.dia_id for turn in turns}
        questions = tuple(
            Question(
                str(q["question"]), int(q["category"]), _evidence(q.get("evidence", []), known)
            )
            for q in qa
            if isinstance(q, dict) and "question" in q and "category" in q
        )
        sample = str(item.get("sample_id", f"conversation-{position}"))
        out.append(Conversation(sample, speakers, tuple(turns), questions))
    return out
