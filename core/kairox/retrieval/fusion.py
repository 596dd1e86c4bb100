"""Fusion: merge several sources' ranked hit lists into one de-duplicated, best-first list.

Four methods, chosen by name:

``rrf``
    Reciprocal rank fusion: a passage scores ``sum(weight_s / (rrf_k + rank_s))`` over the
    sources that returned it. It only looks at ranks, so it needs no calibration.
``minmax``
    Score fusion: each source's scores are min-max normalised to ``[0, 1]``, multiplied by
    the source's weight and summed.
``dbsf``
    Distribution-based score fusion: each source's scores are mapped to ``[0, 1]`` by the
    range ``mean ± 3·std`` of that source's scores (clipped), weighted and summed. Less
    sensitive than min-max to one outlying best or worst hit.
``convex``
    A convex combination of lexical and semantic evidence, the default (:data:`DEFAULT_FUSION`,
    for :func:`fuse`, the composite and ``kairox search``): each
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

import functools
import hashlib
import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence

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
    return hashlib.sha256(_normalise(text).encode("utf-8", "surrogatepass")).hexdigest()


@functools.lru_cache(maxsize=8192)
def _text_key(text: str) -> tuple[str, bool]:
    """``text``'s fingerprint, and whether it may merge hits (blank text says nothing about
    which passage it is). Remembered across calls for the 8,192 latest texts: sources
    return the same text within a call, and searches of one corpus keep returning its
    passages (a warm process, a benchmark)."""
    return text_fingerprint(text), bool(text.strip())


def _normalise(text: str) -> str:
    """``text`` case-folded, with every run of whitespace one space and none at the ends."""
    flat = text.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    if flat.isprintable():
        # Printable text holds no whitespace but the ASCII space, so collapsing runs of
        # spaces does what splitting into words would, several times faster (fusion
        # normalises every distinct hit text of every query).
        while "  " in flat:
            flat = flat.replace("  ", " ")
        flat = flat.strip(" ")
        # Case folding maps letters to letters: it adds and removes no spaces.
        return flat.lower() if flat.isascii() else flat.casefold()
    return " ".join(text.casefold().split())


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
    method: str = DEFAULT_FUSION,
    weights: Mapping[str, float] | None = None,
    rrf_k: int = 60,
    score_kinds: Mapping[str, ScoreKind] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Fuse best-first hit lists from several sources into one best-first list.

    :param ranked: each source's hits, best first, by source name. The name (not
        ``Hit.source``) is what provenance and weights refer to.
    :param method: ``"convex"`` (the default, as for the composite), ``"rrf"``,
        ``"minmax"`` or ``"dbsf"``; see the module docs.
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

    # One entry per (source, hit), in parallel lists ordered by source name, then rank:
    # fusing runs on every retrieval, and building an object per hit costs more than
    # everything else it does.
    active = [name for name in sorted(ranked) if ranked[name] and weights.get(name, 1.0) != 0]
    # A single ranking (the others empty or weighed 0) has nothing to merge with: its ids
    # are unique once de-duplicated, so no passage key (text fingerprint, uri) links or
    # orders anything.
    entries = _Entries(method, rrf_k, merging=len(active) > 1)
    for name in active:  # source-name order: nothing depends on mapping order
        entries.add_source(name, ranked[name], float(weights.get(name, 1.0)), kinds.get(name))

    ordered: list[tuple[float, str, str, str, str, list[int], int]] = []
    values, hits, fingerprints, sources = (
        entries.values,
        entries.hits,
        entries.fingerprints,
        entries.sources,
    )
    groups = _merge_duplicates(entries) if entries.merging else [[i] for i in range(len(hits))]
    for group in groups:
        if len(group) == 1:
            # A passage one source returned (the usual case): its only entry is its best,
            # its survivor and its score.
            best, survivor = group, group[0]
            score = values[survivor]
        else:
            best = _best_per_source(group, sources)
            score = values[best[0]] if len(best) == 1 else math.fsum(values[i] for i in best)
            survivor = entries.survivor(best)
        hit = hits[survivor]
        fingerprint, source = fingerprints[survivor], sources[survivor]
        ordered.append((-score, hit.id, fingerprint, source, hit.uri or "", best, survivor))
    ordered.sort(key=lambda row: row[:5])
    if limit is not None:
        ordered = ordered[:limit]
    # Only the hits returned become FusedHits.
    return [entries.fused_hit(best, survivor, -neg) for neg, *_, best, survivor in ordered]


class _Entries:
    """Every hit being fused, source by source, as parallel lists indexed alike."""

    __slots__ = (
        "fingerprints",
        "hits",
        "mergeable",
        "merging",
        "method",
        "ranks",
        "rrf_k",
        "sources",
        "values",
        "weights",
    )

    def __init__(self, method: str, rrf_k: int, *, merging: bool = True) -> None:
        #: how every source's hits are scored (one method and k for the whole fusion).
        self.method = method
        self.rrf_k = rrf_k
        #: whether passages may merge across sources (False: one source, no text keys).
        self.merging = merging
        self.sources: list[str] = []
        self.ranks: list[int] = []
        self.weights: list[float] = []
        self.hits: list[Hit] = []
        #: text_fingerprint of each hit's text.
        self.fingerprints: list[str] = []
        #: whether the text may merge hits (blank text may not).
        self.mergeable: list[bool] = []
        #: what each entry adds to its passage's fused score, weight included.
        self.values: list[float] = []

    def add_source(
        self, name: str, hits: Sequence[Hit], weight: float, kind: ScoreKind | None
    ) -> None:
        """Append one source's hits ranked 1, 2, ... keeping the first copy of each id."""
        kept: list[Hit] = list(hits)
        if len({hit.id for hit in kept}) != len(kept):  # rare: keep each id's first copy
            first: dict[str, Hit] = {}
            for hit in kept:
                first.setdefault(hit.id, hit)
            kept = list(first.values())
        count = len(kept)
        if self.merging:
            for hit in kept:
                fingerprint, mergeable = _text_key(hit.text)
                self.fingerprints.append(fingerprint)
                self.mergeable.append(mergeable)
        else:
            self.fingerprints.extend([""] * count)
            self.mergeable.extend([False] * count)
        self.sources.extend([name] * count)
        self.ranks.extend(range(1, count + 1))
        self.weights.extend([weight] * count)
        self.hits.extend(kept)
        if count:
            self.values.extend(self.contributions(name, kept, weight, kind))

    def survivor(self, best: Sequence[int]) -> int:
        """The copy a merged passage keeps: lowest rank, then higher weight, then name."""
        return min(best, key=lambda i: (self.ranks[i], -self.weights[i], self.sources[i]))

    def fused_hit(self, best: Sequence[int], survivor: int, score: float) -> FusedHit:
        """The merged hit for one passage, from each source's best entry for it."""
        hit = self.hits[survivor]
        return FusedHit(
            id=hit.id,
            text=hit.text,
            score=score,
            uri=hit.uri,
            metadata=hit.metadata,
            sources=tuple(
                Provenance(source=self.sources[i], rank=self.ranks[i], score=self.hits[i].score)
                for i in best
            ),
        )

    def contributions(
        self, name: str, hits: Sequence[Hit], weight: float, kind: ScoreKind | None
    ) -> list[float]:
        """What each of one source's hits (rank 1 first) adds to its passage's fused score."""
        method, rrf_k = self.method, self.rrf_k
        if method == "rrf":
            # 1/(k + r) first, then the weight: the same rounding as every release before.
            return [weight * (1.0 / (rrf_k + rank)) for rank in range(1, len(hits) + 1)]
        scores = [float(hit.score) for hit in hits]
        if method == "convex":
            weight *= KIND_WEIGHTS.get(kind, 1.0)  # type: ignore[arg-type]
            if not all(math.isfinite(s) for s in scores):
                # Unreadable scores: fall back on the order the source gave.
                values = _stretched_minmax([float(-rank) for rank in range(1, len(hits) + 1)])
            elif kind == ScoreKind.PROBABILITY:
                values = scores
            else:
                values = _stretched_minmax(scores)
        else:
            bad = [hit.id for hit, s in zip(hits, scores, strict=True) if not math.isfinite(s)]
            if bad:
                raise ValueError(f"source {name!r} gave non-finite scores for ids {bad}")
            # PROBABILITY is calibrated already: rescaling would erase the difference
            # between a source that is sure (0.95) and one that is guessing (0.2).
            values = scores if kind == ScoreKind.PROBABILITY else _NORMALISERS[method](scores)
        return [weight * value for value in values]


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


def _uri_key(hit: Hit) -> Hashable:
    """The key under which two hits with a uri count as the same passage: uri and span."""
    start, end = hit.metadata.get("start"), hit.metadata.get("end")
    span = (start, end) if start is not None and end is not None else None
    key: Hashable = ("uri", hit.uri, span)
    try:
        hash(key)
    except TypeError:
        # A span made of unhashable values (a list from JSON): compare by repr.
        key = ("uri", hit.uri, repr(span))
    return key


def _merge_duplicates(entries: _Entries) -> list[list[int]]:
    """Group entries that are the same passage (union-find over shared keys).

    A key only links entries when it is shared by at least two *different* sources: the
    rule is about the same passage reaching us twice. Within one source, two ids with the
    same uri and no span are usually two chunks of one file (Bedrock does this), and must
    stay apart unless another source ties them together. Each group lists its entries in
    entry order (source name, then rank).
    """
    sources = entries.sources
    parent = list(range(len(sources)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        i, j = find(i), find(j)
        if i != j:
            # Always keep the smaller index as root so grouping is order-stable.
            parent[max(i, j)] = min(i, j)

    # A key seen only in one source so far keeps its entries pending; once a second
    # source shares it, they are all linked and the key remembers one of them.
    pending: dict[Hashable, list[int]] = {}
    linked: dict[Hashable, int] = {}
    fingerprints, mergeable = entries.fingerprints, entries.mergeable
    for index, hit in enumerate(entries.hits):
        if hit.uri is None:
            keys: tuple[Hashable, ...] = (fingerprints[index],) if mergeable[index] else ()
        elif mergeable[index]:
            keys = (_uri_key(hit), fingerprints[index])
        else:
            keys = (_uri_key(hit),)
        for key in keys:
            anchor = linked.get(key)
            if anchor is not None:
                union(anchor, index)
                continue
            members = pending.get(key)
            if members is None:
                pending[key] = [index]
            elif sources[members[0]] == sources[index]:
                members.append(index)
            else:
                for member in members:
                    union(member, index)
                linked[key] = index
                del pending[key]

    groups: dict[int, list[int]] = {}
    for index in range(len(sources)):
        groups.setdefault(find(index), []).append(index)
    return list(groups.values())


def _best_per_source(group: Sequence[int], sources: Sequence[str]) -> list[int]:
    """One entry per source, its best rank, sorted by source name.

    Entries are ordered by source name and then rank, so a source's first entry in the
    group is its best.
    """
    best: list[int] = []
    last = None
    for index in group:
        if sources[index] != last:
            best.append(index)
            last = sources[index]
    return best
