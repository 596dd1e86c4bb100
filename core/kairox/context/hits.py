"""Retrieval hits in the prompt: which are offered, where each goes, what fits, the trace.

Hits come either as the fused ranking across every source (with each source's group) or
as per-group lists; either way they are offered best first, each into its group's section
(the workspace's, or one per knowledge base), while the hits allowance lasts
(:func:`add_hits`). :func:`hit_trace` is what :attr:`~kairox.context.assembly.Assembly.hits`
records of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kairox.context.assembly import DROP_BUDGET, DROP_HITS_CAP
from kairox.context.system_message import KB_PREFIX, WORKSPACE, Draft, Piece

if TYPE_CHECKING:
    from kairox.context.assembly import AssemblyInput
    from kairox.retrieval.model import FusedHit

__all__ = ["Retrieved", "add_hits", "hit_sections", "hit_trace", "retrieved_hits"]


@dataclass(frozen=True)
class Retrieved:
    """One hit offered to the prompt: which section it goes to, and why."""

    hit: FusedHit
    group: str
    section: str
    label: str


def retrieved_hits(data: AssemblyInput) -> list[Retrieved]:
    """The hits to offer, best first: the fused ranking as given, or the per-group lists."""
    if data.hits:
        out = []
        for hit in data.hits:
            group = data.groups.get(hit.source, "knowledge_base")
            section = WORKSPACE if group == "workspace" else f"{KB_PREFIX}{hit.source}"
            out.append(Retrieved(hit, group, section, hit.uri or hit.id))
        return out
    out = [Retrieved(h, "workspace", WORKSPACE, h.uri or h.id) for h in data.workspace_hits]
    for kb_id, hits in data.knowledge_base_hits.items():
        section = f"{KB_PREFIX}{kb_id}"
        out += [Retrieved(h, "knowledge_base", section, h.uri or h.id) for h in hits]
    return out


def hit_sections(data: AssemblyInput, retrieved: Sequence[Retrieved]) -> list[str]:
    """The hit sections in render order; the workspace's is always there.

    For the fused ranking, in the order of each section's best hit; for per-group lists,
    the workspace first, then the knowledge bases as given.
    """
    if data.hits:
        sections = list(dict.fromkeys(r.section for r in retrieved))
        if WORKSPACE not in sections:
            sections.insert(0, WORKSPACE)
        return sections
    return [WORKSPACE, *(f"{KB_PREFIX}{k}" for k in data.knowledge_base_hits)]


def add_hits(
    draft: Draft,
    retrieved: Sequence[Retrieved],
    turn_cost: Callable[[int], int],
    share: int,
) -> list[Piece]:
    """Retrieval hits in their given order (fusion's), within the hits allowance.

    The allowance is everything left when the hits and the history that fits both fit.
    Otherwise history "wants the space", and hits get what history leaves them but at
    least ``share`` tokens (``max_hits_tokens_share`` of the budget): retrieval ranks above
    history, yet a long conversation must not be squeezed out by a page of search results.
    Returns every hit's piece, in the order given.
    """
    system, ledgers = draft.system, draft.ledgers
    candidates = [
        (
            r.section,
            system.piece(order, f"### {r.label} ({r.hit.source})\n{r.hit.text}\n", r.label),
        )
        for order, r in enumerate(retrieved)
    ]
    if not candidates:
        return []

    room = draft.limit - system.tokens
    # Cost of every hit together: the pieces, their section headings (hit sections are
    # still empty here) and opening the sections if memories and summaries did not.
    all_hits = sum(piece.tokens for _, piece in candidates)
    all_hits += sum(system.headings[s][1] for s in dict.fromkeys(s for s, _ in candidates))
    all_hits += system.opening_cost()
    wanted_by_history = 0
    for index in reversed(range(len(draft.data.history))):
        cost = turn_cost(index)
        if wanted_by_history + cost > room:
            break
        wanted_by_history += cost
    if all_hits + wanted_by_history <= room:
        allowance = room
    else:
        allowance = min(room, max(share, room - wanted_by_history))

    spent = 0
    for source, piece in candidates:
        cost = system.extra(source, piece)
        if spent + cost <= allowance:
            system.add(source, piece)
            spent += cost
        elif spent + cost <= room:
            ledgers[source].drop(piece.label, DROP_HITS_CAP)
        else:
            ledgers[source].drop(piece.label, DROP_BUDGET)
    return [piece for _, piece in candidates]


def hit_trace(
    retrieved: Sequence[Retrieved], pieces: Sequence[Piece], kept: set[int]
) -> list[dict[str, Any]]:
    """One entry per hit offered (see :attr:`~kairox.context.assembly.Assembly.hits`).

    ``pieces`` are the hits' pieces in the same order, ``kept`` the ids of the pieces the
    finished system message holds.
    """
    return [
        {
            "rank": rank,
            "label": r.label,
            "id": r.hit.id,
            # The document a chunk came from (knowledge-base chunks name it; the
            # workspace's carry their file's path).
            "document": r.hit.metadata.get("document_id") or r.hit.metadata.get("path") or r.hit.id,
            "tokens": piece.tokens,
            "source": r.hit.source,
            "group": r.group,
            "section": r.section,
            "included": id(piece) in kept,
            "found_by": [{"source": p.source, "rank": p.rank} for p in r.hit.sources],
            **_stage_ranks(r.hit),
        }
        for rank, (r, piece) in enumerate(zip(retrieved, pieces, strict=True), start=1)
    ]


def _stage_ranks(hit: Any) -> dict[str, int]:
    """A hit's place before and after search stages, when they ran."""
    ranks = {
        "fused_rank": getattr(hit, "fused_rank", None),
        "reranked_rank": getattr(hit, "reranked_rank", None),
    }
    return {key: value for key, value in ranks.items() if value is not None}
