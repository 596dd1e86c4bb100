"""Fusion: merge several sources' ranked hit lists into one de-duplicated, best-first list.

Three methods, chosen by name:

``rrf``
    Reciprocal rank fusion: a passage scores ``sum(weight_s / (rrf_k + rank_s))`` over the
    sources that returned it. It only looks at ranks, so it needs no calibration; it is
    :func:`fuse`'s default.
``minmax``
    Score fusion: each source's scores are min-max normalised to ``[0, 1]``, multiplied by
    the source's weight and summed.
``dbsf``
    Distribution-based score fusion: each source's scores are mapped to ``[0, 1]`` by the
    range ``mean ± 3·std`` of that source's scores (clipped), weighted and summed. Less
    sensitive than min-max to one outlying best or worst hit.
``convex``
    A convex combination of lexical and semantic evidence, the composite's default: each
    source's scores are min-max normalised over a range stretched one average gap below
    its last hit, so the last hit it returned still counts for something (a passage no
    source returned counts for nothing), and weighted by its :class:`ScoreKind`
    (:data:`KIND_WEIGHTS`) times its own weight, then summed. A source whose scores are
    not all finite is normalised by rank instead (its hit at rank r of n scores
    ``(n - r + 1) / n``), so one odd source never fails the query. The kind weights were
    tuned on SciFact's train split (``benchmarks/tune_hybrid.py``): lexical and semantic
    evidence count the same for Kairox's own sentence-aware dense sources (a dense source
    that scores whole passages only did best at 0.8: give it ``weight = 0.8``). On the
    test split, BM25 (FTS5) + all-MiniLM-L6-v2 fused this way reach a higher nDCG@10 than
    with ``rrf`` (``benchmarks/README.md``).

Passages returned by several sources merge into one :class:`FusedHit` that keeps every
source's rank as provenance. The output never depends on the order in which sources are
listed, only on their names, hits and weights.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kairox.retrieval.model import FusedHit, Hit, Provenance, ScoreKind

__all__ = [
    "DEFAULT_FUSION",
    "FUSION_METHODS",
    "KIND_WEIGHTS",
    "check_method",
    "check_weights",
    "fuse",
    "text_fingerprint",
]

#: The fusion methods :func:`fuse` accepts.
FUSION_METHODS: tuple[str, ...] = ("rrf", "minmax", "dbsf", "convex")
#: What ``CompositeWorkspaceRetriever`` and ``kairox search`` use unless told otherwise.
DEFAULT_FUSION = "convex"
#: ``convex``: how much a source of each score kind counts, before its own weight. Kinds
#: not listed (and sources that declare none) count 1.0. Equal since sentence-aware dense
#: search (tuned on SciFact train: semantic 1.0 beat 0.8 by 0.003 nDCG@10); kept per kind
#: so that a kind can be re-weighted without touching every source's configuration.
KIND_WEIGHTS: dict[ScoreKind, float] = {
    ScoreKind.BM25: 1.0,
    ScoreKind.COSINE: 1.0,
    ScoreKind.DISTANCE: 1.0,
    ScoreKind.PROBABILITY: 1.0,
}
#: Methods that read scores (and so need them finite).
SCORE_METHODS: frozenset[str] = frozenset({"minmax", "dbsf"})

#: One source's raw scores, in rank order -> the same scores mapped to [0, 1].
_Normaliser = Callable[[Sequence[float]], list[float]]


def text_fingerprint(text: str) -> str:
    """A hash of ``text`` that ignores case and whitespace differences.

    Two copies of a passage often differ only in how a source re-flowed or cased them;
    they should still count as the same passage.
    """
    normalised = " ".join(text.casefold().split())
    return hashlib.sha256(normalised.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class _Entry:
    """One hit in one source's list, after duplicate ids within that source were dropped."""

    source: str
    rank: int
    weight: float
    hit: Hit
    fingerprint: str


def check_method(method: str) -> None:
    """Raise ``ValueError`` listing the valid methods unless ``method`` is one of them."""
    if method not in FUSION_METHODS:
        raise ValueError(
            f"unknown fusion method {method!r}; choose one of: {', '.join(FUSION_METHODS)}"
        )


def check_weights(weights: Mapping[str, float]) -> None:
    """Raise ``ValueError`` for a weight that is negative or not a finite number."""
    for name, weight in weights.items():
        if not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            raise ValueError(
                f"weight for source {name!r} must be a finite number >= 0, got {weight!r}"
            )


def fuse(
    ranked: Mapping[str, Sequence[Hit]],
    *,
    method: str = "rrf",
    weights: Mapping[str, float] | None = None,
    rrf_k: int = 60,
    score_kinds: Mapping[str, ScoreKind] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Fuse best-first hit lists from several sources into one best-first list.

    :param ranked: each source's hits, best first, by source name. The name (not
        ``Hit.source``) is what provenance and weights refer to.
    :param method: ``"rrf"`` (default here), ``"minmax"``, ``"dbsf"`` or ``"convex"``
        (the composite's default); see the module docs.
    :param weights: per-source multipliers, 1.0 for a source not listed. A weight of 0
        switches the source off: its hits neither score nor appear, nor count as
        provenance. Weights for names not in ``ranked`` are ignored.
    :param rrf_k: the RRF damping constant; larger values flatten the rank curve.
    :param score_kinds: each source's :class:`ScoreKind`. ``PROBABILITY`` scores are
        calibrated already, so ``minmax``, ``dbsf`` and ``convex`` use them as they are;
        every other kind is normalised per source. ``convex`` also weights by kind.
    :param limit: return at most this many hits (``None``: all).

    **De-duplication.** Within one source, a repeated id keeps its first (best) occurrence
    and later ranks close up. Across sources, two hits are the same passage when they
    have the same ``uri`` and the same span (``metadata["start"]`` and
    ``metadata["end"]``; same uri with no span on either side also counts), or the same
    text up to case and whitespace (empty text never matches). Sameness is transitive.
    A merged hit keeps one :class:`Provenance` per source (that source's best rank),
    sorted by source name, and scores each source once.

    **Surviving copy.** The merged hit's id, text, uri and metadata come from the copy
    its best-ranking source returned: lowest rank wins, then the higher source weight,
    then the alphabetically first source name.

    **Ties.** Hits with equal fused scores are ordered by id, then by text fingerprint
    (then by source name and uri, which only separate otherwise identical hits), so the
    result is deterministic and the same whatever order ``ranked`` lists its sources in.
    Sums are computed with :func:`math.fsum`, so equal terms give bit-equal scores.

    :raises ValueError: for an unknown method, a negative or non-finite weight, a
        negative ``rrf_k`` or ``limit``, or (for ``minmax``/``dbsf``) a non-finite score.
        ``rrf`` and ``convex`` accept any score.
    """
    check_method(method)
    weights = dict(weights or {})
    check_weights(weights)
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    kinds = score_kinds or {}

    # Work in source-name order from here on, so nothing depends on mapping order.
    lists: dict[str, list[_Entry]] = {}
    # Sources often return the very same text (two views of one index, one corpus in
    # several stores): hash each distinct text once, the costliest step of fusing.
    fingerprints: dict[str, str] = {}
    for name in sorted(ranked):
        weight = float(weights.get(name, 1.0))
        if weight == 0:
            continue
        lists[name] = _rank_source(name, ranked[name], weight, fingerprints)

    contribution = _contributions(lists, method, rrf_k, kinds)
    groups = _merge_duplicates(lists)

    fused: list[tuple[tuple[Any, ...], FusedHit]] = []
    for group in groups:
        best_per_source = _best_per_source(group)
        survivor = min(best_per_source, key=lambda e: (e.rank, -e.weight, e.source))
        score = math.fsum(contribution[(e.source, e.rank)] for e in best_per_source)
        hit = FusedHit(
            id=survivor.hit.id,
            text=survivor.hit.text,
            score=score,
            uri=survivor.hit.uri,
            metadata=survivor.hit.metadata,
            sources=tuple(
                Provenance(source=e.source, rank=e.rank, score=e.hit.score) for e in best_per_source
            ),
        )
        sort_key = (-score, hit.id, survivor.fingerprint, survivor.source, hit.uri or "")
        fused.append((sort_key, hit))

    fused.sort(key=lambda pair: pair[0])
    hits = [hit for _, hit in fused]
    return hits if limit is None else hits[:limit]


def _rank_source(
    name: str, hits: Sequence[Hit], weight: float, fingerprints: dict[str, str]
) -> list[_Entry]:
    """Number one source's hits 1, 2, ... keeping only the first occurrence of each id.

    ``fingerprints`` memoises :func:`text_fingerprint` by text across the call.
    """
    seen: set[str] = set()
    entries: list[_Entry] = []
    for hit in hits:
        if hit.id in seen:
            continue
        seen.add(hit.id)
        fingerprint = fingerprints.get(hit.text)
        if fingerprint is None:
            fingerprint = fingerprints[hit.text] = text_fingerprint(hit.text)
        entries.append(_Entry(name, len(entries) + 1, weight, hit, fingerprint))
    return entries


def _contributions(
    lists: Mapping[str, list[_Entry]],
    method: str,
    rrf_k: int,
    kinds: Mapping[str, ScoreKind],
) -> dict[tuple[str, int], float]:
    """What each (source, rank) adds to its passage's fused score, weight included."""
    out: dict[tuple[str, int], float] = {}
    for name, entries in lists.items():
        if not entries:
            continue
        weight = entries[0].weight
        if method == "rrf":
            values = [1.0 / (rrf_k + e.rank) for e in entries]
        elif method == "convex":
            weight *= KIND_WEIGHTS.get(kinds.get(name), 1.0)  # type: ignore[arg-type]
            scores = [float(e.hit.score) for e in entries]
            if not all(math.isfinite(s) for s in scores):
                # Unreadable scores: fall back on the order the source gave.
                values = _stretched_minmax([float(-e.rank) for e in entries])
            elif kinds.get(name) == ScoreKind.PROBABILITY:
                values = scores
            else:
                values = _stretched_minmax(scores)
        else:
            scores = [float(e.hit.score) for e in entries]
            bad = [e.hit.id for e, s in zip(entries, scores, strict=True) if not math.isfinite(s)]
            if bad:
                raise ValueError(f"source {name!r} gave non-finite scores for ids {bad}")
            if kinds.get(name) == ScoreKind.PROBABILITY:
                # Calibrated already: rescaling would erase the difference between a
                # source that is sure (0.95) and one that is guessing (0.2).
                values = scores
            else:
                values = _NORMALISERS[method](scores)
        for entry, value in zip(entries, values, strict=True):
            out[(name, entry.rank)] = weight * value
    return out


def _minmax(scores: Sequence[float]) -> list[float]:
    low, high = min(scores), max(scores)
    if high == low:
        # One hit, or all tied: the source gives no evidence to rank its hits apart, but
        # it did return them. 1.0 keeps them on par with a top hit of another source
        # (0.0 would silently erase a source whose only hit is exactly what was asked).
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def _stretched_minmax(scores: Sequence[float]) -> list[float]:
    """Min-max over a range that reaches one average gap below the lowest score.

    A hit a source returned, even its last, is evidence a passage it did not return
    lacks; plain min-max gives both 0. With n hits the last scores ``g / (range + g)``
    where ``g = range / (n - 1)``; scores given as ``-rank`` map rank r to
    ``(n - r + 1) / n``.
    """
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)  # as min-max: no evidence to rank them apart
    gap = (high - low) / (len(scores) - 1)
    return [(s - low + gap) / (high - low + gap) for s in scores]


def _dbsf(scores: Sequence[float]) -> list[float]:
    mean = statistics.fmean(scores)
    std = statistics.pstdev(scores, mu=mean)
    if std == 0:
        # Same reasoning as min-max: no spread means no evidence against any hit.
        return [1.0] * len(scores)
    low, high = mean - 3 * std, mean + 3 * std
    return [min(1.0, max(0.0, (s - low) / (high - low))) for s in scores]


_NORMALISERS: dict[str, _Normaliser] = {"minmax": _minmax, "dbsf": _dbsf}


def _passage_keys(entry: _Entry) -> list[Hashable]:
    """The keys under which two entries count as the same passage."""
    keys: list[Hashable] = []
    hit = entry.hit
    if hit.uri is not None:
        start, end = hit.metadata.get("start"), hit.metadata.get("end")
        span = (start, end) if start is not None and end is not None else None
        try:
            key: Hashable = ("uri", hit.uri, span)
            hash(key)
        except TypeError:
            # A span made of unhashable values (a list from JSON): compare by repr.
            key = ("uri", hit.uri, repr(span))
        keys.append(key)
    # Empty text says nothing about which passage it is; never merge on it.
    if hit.text.strip():
        keys.append(("text", entry.fingerprint))
    return keys


def _merge_duplicates(lists: Mapping[str, list[_Entry]]) -> list[list[_Entry]]:
    """Group entries that are the same passage (union-find over shared keys).

    A key only links entries when it is shared by at least two *different* sources: the
    rule is about the same passage reaching us twice. Within one source, two ids with the
    same uri and no span are usually two chunks of one file (Bedrock does this), and must
    stay apart unless another source ties them together.
    """
    entries = [entry for name in sorted(lists) for entry in lists[name]]
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_key: dict[Hashable, list[int]] = {}
    for index, entry in enumerate(entries):
        for key in _passage_keys(entry):
            by_key.setdefault(key, []).append(index)
    for members in by_key.values():
        if len({entries[i].source for i in members}) < 2:
            continue
        root = find(members[0])
        for other in members[1:]:
            other_root = find(other)
            if other_root != root:
                # Always keep the smaller index as root so grouping is order-stable.
                root, other_root = min(root, other_root), max(root, other_root)
                parent[other_root] = root

    groups: dict[int, list[_Entry]] = {}
    for index, entry in enumerate(entries):
        groups.setdefault(find(index), []).append(entry)
    return list(groups.values())


def _best_per_source(group: Sequence[_Entry]) -> list[_Entry]:
    """One entry per source (its best rank), sorted by source name."""
    best: dict[str, _Entry] = {}
    for entry in group:
        current = best.get(entry.source)
        if current is None or entry.rank < current.rank:
            best[entry.source] = entry
    return [best[name] for name in sorted(best)]
