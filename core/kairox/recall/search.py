"""Ranking the archive for a prompt: words and vectors fused, then a conversation's shape.

A message is found by its words (FTS5 BM25 over speaker and text, the question asked without
its stop words) and by its meaning (the workspace embedder's cosine), the two rankings fused
``convex`` as every Kairox search is (:func:`kairox.retrieval.fusion.fuse`). A conversation
says one thing over several messages, so the fused scores are then spread over it: a message
by someone the prompt names scores a little more (:data:`SPEAKER_BOOST`), each message gains
a share of its best neighbour's score (:data:`NEIGHBOUR_LIFT`) and of the best score in its
sitting (:data:`SITTING_LIFT`). Each hit is handed on with the neighbours that complete it:
the message before a short reply (what it answers), the message after a question (its
answer).

Everything after fusion is a few numpy operations over one score per archived message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import numpy as np

from kairox.context.assembly import RecalledMessage, RecalledTurn
from kairox.recall.archive import MessageArchive
from kairox.recall.rows import ArchivedMessage, MessageRows
from kairox.retrieval.fusion import fuse
from kairox.retrieval.model import FAN_OUT, Hit, ScoreKind
from kairox.retrieval.vectors import default_fusion_weight, top_k

__all__ = ["RecallScope", "RecallSearch", "recall_for", "recalled_json"]

#: How many messages each of words and vectors proposes before fusion.
CANDIDATES: Final = 200
# The constants below were tuned on three LoCoMo development conversations (conv-26,
# conv-41, conv-43; benchmarks/README.md, "Recall"), from recall@10 0.572 (words alone),
# then tuned again once the words were asked without stop words (0.726 -> 0.738).
#: A message gains this share of its best neighbour's score (a neighbour two messages
#: away counts half): one exchange says one thing over several messages.
NEIGHBOUR_LIFT: Final = 0.7
#: ... and this share of the best score in its sitting.
SITTING_LIFT: Final = 0.45
#: A message by someone the prompt names scores this much more.
SPEAKER_BOOST: Final = 0.4
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
    """How recall ranks (the defaults are the tuned constants above)."""

    vector_weight: float | None = None
    """``None``: the embedder's ``fusion_weight`` when it has one (as the workspace
    index weighs its vector hits), else 1."""
    words_weight: float = 1.0
    neighbour_lift: float = NEIGHBOUR_LIFT
    sitting_lift: float = SITTING_LIFT
    speaker_boost: float = SPEAKER_BOOST
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
    encoding: str | None = None,
) -> list[RecalledTurn]:
    """The ``k`` archived messages most relevant to ``text`` that ``session_id`` may
    recall under ``scope``, best first, each with the neighbours that complete it.

    ``sync`` first indexes what the event store holds and the archive lacks. With an
    ``encoding``, each message carries its prompt line's token count in it (counted once
    per process and message, not once per turn).
    """
    scope = RecallScope(scope)
    if scope is RecallScope.NONE or not text.strip() or k < 1:
        return []
    if sync:
        archive.sync()
    rows = archive.rows
    if not len(rows):
        return []
    search = search or RecallSearch()
    own = session_id if scope is RecallScope.OWN else None
    scores = _shaped(rows, _fused(archive, text, own, search), text, search)
    if own is not None:
        code = rows.session_codes.get(own, -1)
        scores[:-1][rows.array("session") != code] = 0.0
    scores = scores[:-1]
    count = min(k, int(np.count_nonzero(scores > 0)))
    if count == 0:
        return []
    best = np.argpartition(-scores, count - 1)[:count]
    best = best[np.lexsort((best, -scores[best]))]
    return _turns(rows, best.tolist(), scores[best].tolist(), encoding)


def _fused(archive: MessageArchive, text: str, own: str | None, search: RecallSearch) -> np.ndarray:
    """The fused score of every message (0 for those neither ranking found), plus one
    zero at the end (see :class:`~kairox.recall.rows.MessageRows`)."""
    rows = archive.rows
    position = rows.position
    ranked: dict[str, list[Hit]] = {}
    words = archive.search_words(text, search.candidates, own)
    # Ids are row positions; the uri tells fusion two sources found the same message
    # (two messages with the same text are still two messages).
    ranked[_WORDS] = [
        Hit(str(position[event_id]), "", score, _WORDS, f"recall:{event_id}")
        for event_id, score in words
        if event_id in position
    ]
    vector_weight = search.vector_weight
    if vector_weight is None:
        vector_weight = default_fusion_weight(archive.embedder)
    if vector_weight:
        mask = None
        if own is not None:
            mask = rows.array("session") == rows.session_codes.get(own, -1)
        query = np.asarray(archive.embedder.embed([text])[0])
        # Recall runs next to the turn's other sources: one BLAS thread (kairox.retrieval.blas).
        fan_out = FAN_OUT.set(max(2, FAN_OUT.get()))
        try:
            found, cosines = top_k(rows.matrix, query, search.candidates, mask=mask)
        finally:
            FAN_OUT.reset(fan_out)
        ranked[_VECTORS] = [
            Hit(str(p), "", s, _VECTORS, f"recall:{rows.messages[p].event_id}")
            for p, s in zip(found.tolist(), cosines.tolist(), strict=True)
        ]
    fused = fuse(
        ranked,
        method="convex",
        weights={_WORDS: search.words_weight, _VECTORS: vector_weight},
        score_kinds={_WORDS: ScoreKind.BM25, _VECTORS: ScoreKind.COSINE},
    )
    scores = np.zeros(len(rows) + 1, dtype=np.float64)
    for hit in fused:
        scores[int(hit.id)] = hit.score
    return scores


def _shaped(rows: MessageRows, scores: np.ndarray, text: str, search: RecallSearch) -> np.ndarray:
    """Fused scores spread over the conversation: speakers named, neighbours, sittings."""
    if search.speaker_boost:
        named = rows.named_speakers(text)
        if named:
            mine = np.isin(rows.array("speaker"), named)
            scores[:-1][mine] *= 1 + search.speaker_boost
    if search.neighbour_lift:
        near = np.maximum(scores[rows.array("before1")], scores[rows.array("after1")])
        far = np.maximum(scores[rows.array("before2")], scores[rows.array("after2")]) / 2
        lifted = scores.copy()
        lifted[:-1] += search.neighbour_lift * np.maximum(near, far)
        scores = lifted
    if search.sitting_lift:
        sittings = rows.array("sitting")
        best = np.zeros(len(rows), dtype=np.float64)
        np.maximum.at(best, sittings, scores[:-1])
        scores[:-1] += search.sitting_lift * best[sittings]
    return scores


def _turns(
    rows: MessageRows, positions: list[int], scores: list[float], encoding: str | None
) -> list[RecalledTurn]:
    """The messages at ``positions`` with the neighbours that complete them: the message
    before a short reply (what it answers), the message after a question (its answer)."""
    count = len(rows)
    before, after = rows.array("before1").tolist(), rows.array("after1").tolist()
    short, question = rows.flags(SHORT_REPLY_WORDS)
    turns = []
    for position, score in zip(positions, scores, strict=True):
        shown = [position]
        if short[position] and before[position] < count:
            shown.insert(0, before[position])
        if question[position] and after[position] < count:
            shown.append(after[position])
        messages = tuple(_recalled(rows, p, encoding) for p in shown)
        turns.append(RecalledTurn(rows.messages[position].event_id, messages, score))
    return turns


def _recalled(rows: MessageRows, position: int, encoding: str | None) -> RecalledMessage:
    message: ArchivedMessage = rows.messages[position]
    tokens = None if encoding is None else (encoding, rows.line_tokens(encoding, position))
    # Positional: this runs for every candidate of every turn.
    return RecalledMessage(
        message.event_id,
        message.session_id,
        message.who,
        message.time,
        message.text,
        message.tool_output,
        tokens,
    )


def recalled_json(turns: Sequence[RecalledTurn]) -> list[dict[str, Any]]:
    """Recall hits as JSON, best first: the message found and the ones that complete it
    (``tool_output``: text a tool returned, unvetted)."""
    return [
        {
            "rank": rank,
            "event_id": turn.event_id,
            "score": round(turn.score, 6),
            "messages": [
                {
                    "event_id": m.event_id,
                    "session": m.session_id,
                    "speaker": m.who,
                    "time": m.time,
                    "text": m.text,
                    "tool_output": m.tool_output,
                    "hit": m.event_id == turn.event_id,
                }
                for m in turn.messages
            ],
        }
        for rank, turn in enumerate(turns, start=1)
    ]
