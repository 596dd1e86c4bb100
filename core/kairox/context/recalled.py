"""Recalled messages in the prompt: the ``recall`` section, its share, no duplicates.

Recall competes with history for the room the other sections leave. When everything fits,
history is kept whole and recall takes what is left. When it does not, recall gets at
least its share (``recall_share`` of the budget, at most ``recall_max_tokens``) and history
keeps the newest turns that fit in the rest: past the newest turns, the messages most
relevant to the prompt are worth more than the next older ones. The history that will be
kept is planned first, so that a message it holds is never recalled as well; the history
selection then stops at any turn holding a recalled message (:attr:`RecallOutcome.event_ids`).

The section shows messages in the order they were said, under one heading per session and
minute (``### <session> · 2023-05-08 13:56``), each as ``- <speaker>: <text>``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kairox.context.assembly import DROP_BUDGET, RecalledMessage, RecalledTurn
from kairox.context.system_message import RECALL, Draft, Piece, SystemMessage

__all__ = ["RecallOutcome", "add_recall", "kept_recalled", "recall_line"]

#: Below this many tokens of room, no recalled message fits: stop looking.
_SMALLEST = 6
#: After this many messages in a row that do not fit, the rest are not looked at either.
_MISFITS = 16


def recall_line(who: str, text: str) -> str:
    """How one recalled message reads in the prompt."""
    return f"- {who}: {text.strip()}\n"


@dataclass
class RecallOutcome:
    """What recall put in the system message."""

    event_ids: set[int] = field(default_factory=set)
    """Every recalled message's event id (history stops at a turn holding one)."""
    tool_pieces: set[int] = field(default_factory=set)
    """``id()`` of each piece holding tool output (unvetted text, like tool output in history)."""


@functools.lru_cache(maxsize=4096)  # messages of one sitting share their times
def _when(time: str) -> str:
    try:
        return datetime.fromisoformat(time).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return time


def _group(message: RecalledMessage) -> tuple[str, str]:
    return message.session_id, _when(message.time)


def _orders(turns: Sequence[RecalledTurn]) -> dict[object, int]:
    """Render positions: groups by their first message, a heading before its messages."""
    first: dict[tuple[str, str], int] = {}
    for turn in turns:
        for message in turn.messages:
            key = _group(message)
            first[key] = min(first.get(key, message.event_id), message.event_id)
    keys: list[tuple[int, int, int, object]] = []
    seen: set[int] = set()
    for turn in turns:
        for message in turn.messages:
            if message.event_id not in seen:
                seen.add(message.event_id)
                keys.append((first[_group(message)], 1, message.event_id, message.event_id))
    keys += [(event_id, 0, 0, group) for group, event_id in first.items()]
    keys.sort(key=lambda key: key[:3])
    return {key[3]: order for order, key in enumerate(keys)}


def add_recall(
    draft: Draft,
    turn_cost: Callable[[int], int],
    share: int,
    max_tokens: int,
) -> RecallOutcome:
    """Recalled messages, best turn first, in the room history does not need.

    ``share`` is the least recall gets when history wants the room (tokens);
    ``max_tokens`` the most it takes at all.
    """
    outcome = RecallOutcome()
    turns = draft.data.recall
    if not turns or max_tokens <= 0:
        return outcome
    system, history = draft.system, draft.data.history
    room = draft.limit - system.tokens
    costs: list[int] = []  # newest first, while they fit the room
    for index in reversed(range(len(history))):
        cost = turn_cost(index)
        if sum(costs) + cost > room:
            break
        costs.append(cost)
    if len(costs) == len(history):
        allowance = room - sum(costs)
    else:
        allowance = min(room, max(share, room - sum(costs)))
    planned = 0
    live: set[int] = set()
    for offset, cost in enumerate(costs):
        if planned + cost > room - allowance:
            break
        planned += cost
        live.update(history[len(history) - 1 - offset].event_ids)
    budget = min(room - planned, max_tokens)

    orders = _orders(turns)
    candidates = {m.event_id for turn in turns for m in turn.messages} - live
    headings: dict[tuple[str, str], Piece] = {}
    spent = 0
    misfits = 0
    encoding = system.encoding
    for turn in turns:
        if budget - spent < _SMALLEST or misfits >= _MISFITS:
            break
        for message in turn.messages:
            if message.event_id in live or message.event_id in outcome.event_ids:
                continue
            text = recall_line(message.who, message.text)
            label = f"event {message.event_id}"
            order = orders[message.event_id]
            if message.tokens is not None and message.tokens[0] == encoding:
                piece = Piece(order, text, message.tokens[1], label)  # counted when archived
            else:
                piece = system.piece(order, text, label, ("recall", message.event_id))
            group = _group(message)
            heading = headings.get(group)
            new_heading = heading is None or heading not in system.sections[RECALL]
            if new_heading:
                heading = system.piece(orders[group], f"### {group[0]} · {group[1]}\n", "")
            assert heading is not None
            cost = system.extra(RECALL, piece) + (heading.tokens if new_heading else 0)
            if spent + cost > budget:
                misfits += 1
                continue
            misfits = 0
            if new_heading:
                system.add(RECALL, heading)
                headings[group] = heading
            system.add(RECALL, piece)
            spent += cost
            outcome.event_ids.add(message.event_id)
            if message.tool_output:
                outcome.tool_pieces.add(id(piece))
    left = len(candidates) - len(outcome.event_ids)
    if left > 0:
        draft.ledgers[RECALL].drop(f"{left} less relevant messages", DROP_BUDGET, count=left)
    return outcome


def kept_recalled(system: SystemMessage) -> set[int]:
    """Event ids of the recalled messages the system message holds now."""
    return {int(p.label.removeprefix("event ")) for p in system.sections[RECALL] if p.label}
