"""Ranking the archive for a prompt: words and vectors fused, neighbours, completing turns.

A message is found by its words (FTS5 BM25 over speaker and text) and by its meaning (the
workspace embedder's cosine), the two rankings fused ``convex`` as every Kairox search is
(:func:`kairox.retrieval.fusion.fuse`). A conversation says one thing over several
messages, so each message's score is then lifted by its best neighbour's
(:data:`NEIGHBOUR_LIFT`): a reply next to the question that names the topic ranks with it.
Each hit is handed on with the neighbours that complete it: the message before a short
reply (what it answers), the message after a question (its answer).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numpy as np

from kairox.context.assembly import RecalledMessage, RecalledTurn
from kairox.recall.archive import ArchivedMessage, MessageArchive, MessageRows
from kairox.retrieval.fusion import fuse
from kairox.retrieval.model import Hit, ScoreKind
from kairox.retrieval.vectors import top_k

__all__ = ["RecallScope", "RecallSearch", "recall_for"]

#: How many messages each of words and vectors proposes before fusion.
CANDIDATES: Final = 300
#: A message's score gains this share of its best neighbour's (same session, next to it).
NEIGHBOUR_LIFT: Final = 0.3
#: A reply this short (in words) is shown with the message it answers.
SHORT_REPLY_WORDS: Final = 8

_WORDS = "recall-words"
_VECTORS = "recall-vectors"


class RecallScope(StrEnum):
    """Whose messages a session may recall."""

    OWN = "own"
    """Its own earlier messages only (those no longer in its live history)."""
    WORKSPACE = "workspace"
    """Every session of the workspace (the default)."""
    NONE = "none"
    """Nothing: recall is off."""


@dataclass(frozen=True)
class RecallSearch:
    """How recall ranks: the fusion weights of words and vectors, the neighbour lift."""

    vector_weight: float = 1.0
    words_weight: float = 1.0
    neighbour_lift: float = NEIGHBOUR_LIFT
    candidates: int = CANDIDATES


def recall_for(
    archive: MessageArchive,
    text: str,
    *,
    session_id: str,
    scope: RecallScope | str = RecallScope.WORKSPACE,
    k: int = CANDIDATES,
    search: RecallSearch | None = None,
    sync: bool = True,
) -> list[RecalledTurn]:
    """The ``k`` archived messages most relevant to ``text`` that ``session_id`` may
    recall under ``scope``, best first, each with the neighbours that complete it.

    ``sync`` first indexes what the event store holds and the archive lacks.
    """
    scope = RecallScope(scope)
    if scope is RecallScope.NONE or not text.strip() or k < 1:
        return []
    if sync:
        archive.sync()
    search = search or RecallSearch()
    own = session_id if scope is RecallScope.OWN else None
    scores = _fused(archive, text, own, search)
    rows = archive.rows
    if search.neighbour_lift:
        scores = _lifted(rows, scores, search.neighbour_lift)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [_turn(rows, position, score) for position, score in ranked]


def _fused(
    archive: MessageArchive, text: str, own: str | None, search: RecallSearch
) -> dict[int, float]:
    """Row position -> fused score of every message words or vectors proposed."""
    rows = archive.rows
    position = rows.position
    ranked: dict[str, list[Hit]] = {}
    words = archive.search_words(text, search.candidates, own)
    ranked[_WORDS] = [
        Hit(str(position[event_id]), "", score, _WORDS, f"recall:{event_id}")
        for event_id, score in words
        if event_id in position
    ]
    if search.vector_weight and len(rows.messages):
        mask = None
        if own is not None:
            code = rows.session_codes.get(own)
            mask = rows.codes == (-1 if code is None else code)
        query = archive.embedder.embed([text])[0]
        found, cosines = top_k(
            rows.matrix, np.asarray(query), search.candidates, mask=mask, sentences=None
        )
        ranked[_VECTORS] = [
            Hit(str(p), "", float(s), _VECTORS, f"recall:{rows.messages[p].event_id}")
            for p, s in zip(found.tolist(), cosines.tolist(), strict=True)
        ]
    fused = fuse(
        ranked,
        method="convex",
        weights={_WORDS: search.words_weight, _VECTORS: search.vector_weight},
        score_kinds={_WORDS: ScoreKind.BM25, _VECTORS: ScoreKind.COSINE},
    )
    return {int(hit.id): hit.score for hit in fused}


def _lifted(rows: MessageRows, scores: dict[int, float], lift: float) -> dict[int, float]:
    """Each scored message, and each neighbour of one, lifted by its best neighbour."""
    candidates = set(scores)
    for position in scores:
        candidates.update(_neighbours(rows, position))
    out = {}
    for position in candidates:
        own = scores.get(position, 0.0)
        best = max((scores.get(n, 0.0) for n in _neighbours(rows, position)), default=0.0)
        out[position] = own + lift * best
    return out


def _neighbours(rows: MessageRows, position: int) -> list[int]:
    """Positions of the messages right before and after ``position`` in its session."""
    message = rows.messages[position]
    order = rows.sessions[message.session_id]
    found = []
    # Positions grow with event ids within a session, so a session's list is sorted.
    index = _index_in(order, position)
    if index > 0:
        found.append(order[index - 1])
    if index + 1 < len(order):
        found.append(order[index + 1])
    return found


def _index_in(order: list[int], position: int) -> int:
    return bisect.bisect_left(order, position)


def _turn(rows: MessageRows, position: int, score: float) -> RecalledTurn:
    """The message at ``position`` with the neighbours that complete it."""
    message = rows.messages[position]
    before, after = _before_after(rows, position)
    shown = [message]
    if before is not None and len(message.text.split()) <= SHORT_REPLY_WORDS:
        shown.insert(0, before)  # a short reply means little without what it answers
    if after is not None and message.text.rstrip().endswith("?"):
        shown.append(after)  # a question is completed by its answer
    return RecalledTurn(message.event_id, tuple(_recalled(m) for m in shown), score)


def _before_after(
    rows: MessageRows, position: int) -> tuple[ArchivedMessage | None, ArchivedMessage | None]:
    order = rows.sessions[rows.messages[position].session_id]
    index = _index_in(order, position)
    before = rows.messages[order[index - 1]] if index > 0 else None
    after = rows.messages[order[index + 1]] if index + 1 < len(order) else None
    return before, after


def _recalled(message: ArchivedMessage) -> RecalledMessage:
    return RecalledMessage(
        message.event_id,
        message.session_id,
        message.who,
        message.time,
        message.text,
        message.tool_output,
    )
