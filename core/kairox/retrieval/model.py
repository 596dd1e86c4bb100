"""The retrieval data model: what a query is, what a hit is, and how a source reports back."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kairox.retrieval.filters.model import FilterExpr
from kairox.retrieval.filters.parse import parse_filter

#: How many sources the retrieval running in this context asks at once (1: a source asked
#: alone). The composite sets it for its fan-out; the context follows each source (and
#: the query embedding) into its worker thread. A source or embedding backend whose work
#: can spread over every core (torch, a BLAS) may read it to take one core instead while
#: others run next to it: a parallel section waits for a core another source holds.
FAN_OUT: ContextVar[int] = ContextVar("kairox_fan_out", default=1)


class ScoreKind(StrEnum):
    """How to read a source's ``Hit.score``; fusion needs this to normalise fairly.

    Every kind is oriented so that higher is better once it reaches a ``Hit``: a source
    whose engine reports "lower is better" (FTS5 ``bm25()``, vector distances) flips the
    sign before returning.
    """

    BM25 = "bm25"
    COSINE = "cosine"
    DISTANCE = "distance"
    PROBABILITY = "probability"


@dataclass(frozen=True, slots=True)
class Query:
    """One retrieval request.

    :param text: what the user typed, verbatim. Sources must accept any string,
        including quotes, colons, parentheses, boolean words and the empty string.
    :param k: how many hits to return at most.
    :param filters: a metadata filter: its canonical JSON form (``{"year": {"$gte":
        2020}}``; plain ``{"lang": "en"}`` equality and ``{"lang": ["en", "de"]}`` any-of
        still work), its text form (``"year >= 2020 and not draft"``) or a parsed
        expression (see :mod:`kairox.retrieval.filters`). A malformed one raises
        :class:`~kairox.retrieval.filters.FilterError` here, before any source is asked.
    :param embeddings: the query text already embedded, by embedding-backend name. The
        composite fills it once per backend in use, so dense sources look their vector
        up here (``query.embeddings.get(self.embedder.name)``) instead of re-embedding.
    :param embed_text: what dense sources embed instead of ``text`` (a query transform's
        hypothetical passage, HyDE); lexical sources always search ``text``.

    ``filter`` is ``filters`` parsed (``None``: no filter); sources compile it.
    """

    text: str
    k: int = 10
    filters: Mapping[str, Any] | FilterExpr | str = field(default_factory=dict)
    embeddings: Mapping[str, Any] = field(default_factory=dict)
    embed_text: str | None = None
    filter: FilterExpr | None = field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Query.text must be a str, got {type(self.text).__name__}")
        if self.k < 1:
            raise ValueError(f"Query.k must be at least 1, got {self.k}")
        object.__setattr__(self, "filter", parse_filter(self.filters))


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved passage, as a source returns it (best first).

    :param id: the source's stable id for the passage.
    :param text: the passage text.
    :param score: the source's score, higher is better (see :class:`ScoreKind`).
    :param source: the name of the source that produced the hit.
    :param uri: where the passage lives (a path, an ``s3://`` url, ...), if known.
    :param metadata: anything else the source knows about the passage.
    """

    id: str
    text: str
    score: float
    source: str
    uri: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


class SourceStatus(StrEnum):
    """How one source's part of a retrieval ended (:attr:`SourceReport.status`)."""

    OK = "ok"
    TIMEOUT = "timeout"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class SourceReport:
    """What happened to one source during one retrieval."""

    source: str
    status: SourceStatus
    latency_ms: float = 0.0
    hit_count: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where one fused hit was found: a source, its 1-based rank there, and its raw score.

    :param source: the source's name.
    :param rank: the hit's position in that source's list, 1 for the best hit (after
        duplicate ids within the source were dropped).
    :param score: the source's own score for the hit, as the source returned it.
    """

    source: str
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class FusedHit:
    """One passage after fusion: a single copy of its content plus every source that found it.

    When several sources return the same passage (same ``uri`` and span, or the same
    normalised text), they merge into one ``FusedHit``. ``id``, ``text``, ``uri`` and
    ``metadata`` come from one surviving copy, chosen by a fixed rule (see
    :func:`kairox.retrieval.fusion.fuse`); ``sources`` keeps every source's rank and raw
    score, sorted by source name.

    :param id: the surviving copy's id (ids are per source: two sources may reuse one).
    :param text: the surviving copy's text.
    :param score: the fused score, higher is better; only comparable within one result.
    :param uri: the surviving copy's uri, if known.
    :param metadata: the surviving copy's metadata.
    :param sources: one :class:`Provenance` per source that returned the passage.
    :param fused_rank: its 1-based place in the fused ranking, when a search stage ran.
    :param reranked_rank: its 1-based place after a reranker reordered the candidates
        (``None`` when no reranker ran, or it failed and the fused order stands).
    """

    id: str
    text: str
    score: float
    uri: str | None
    metadata: Mapping[str, Any]
    sources: tuple[Provenance, ...]
    fused_rank: int | None = None
    reranked_rank: int | None = None

    def __post_init__(self) -> None:
        # A fused hit always comes from somewhere; an empty provenance would leave
        # ``source`` undefined and hide a bug in whoever built the hit.
        if not self.sources:
            raise ValueError(f"FusedHit {self.id!r} needs at least one Provenance")

    @property
    def source(self) -> str:
        """The source that ranked this passage best; equal ranks go to the first name.

        Fusion's surviving-copy rule also weighs source weights on equal ranks, which a
        ``FusedHit`` does not know, so with unequal weights and a rank tie the text may
        come from another source than this one; ``sources`` has the full picture.
        """
        return min(self.sources, key=lambda p: (p.rank, p.source)).source


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    """Fused hits (best first) plus one report per source that was asked (or skipped).

    :param hits: the fused, de-duplicated hits, at most ``query.k`` of them.
    :param reports: one :class:`SourceReport` per configured source, in source order.
    :param groups: source name -> its group (``workspace`` or ``knowledge_base``), as the
        source's spec declared it; filled by the facade, empty from a bare composite.
    :param stages: one report per search stage that ran (``transform:<name>``,
        ``rerank:<name>``), in the order they ran; empty when none is configured.
    """

    hits: list[FusedHit]
    reports: list[SourceReport]
    groups: Mapping[str, str] = field(default_factory=dict)
    stages: list[SourceReport] = field(default_factory=list)

    def group_of(self, hit: FusedHit) -> str:
        """The group of the source that ranked ``hit`` best (``knowledge_base`` if unknown)."""
        return self.groups.get(hit.source, "knowledge_base")


@runtime_checkable
class Source(Protocol):
    """A source of hits: a workspace retriever or a knowledge base.

    ``name`` is unique within one composite; ``score_kind`` says how to read scores.
    ``retrieve`` returns at most ``query.k`` hits, best first. Sync engines run their
    blocking work in a thread (``asyncio.to_thread``) so one source never stalls the others.
    A source may also define ``unavailable_reason() -> str | None``: a reason means it
    cannot answer yet (an index never built), and it is reported ``skipped`` with that
    reason instead of being asked. A dense source also has an ``embedder`` attribute (an
    :class:`~kairox.retrieval.embedding.EmbeddingBackend`) so the composite can embed the query
    once per backend and hand it over in ``query.embeddings``.

    A source whose answer is local disk and CPU work only (no network, no lock another
    process may hold for long), well inside its deadline, may also define
    ``retrieve_local(query) -> list[Hit]``: the same answer as ``retrieve``, computed in
    the calling thread. A search whose sources are all such (needing no query vector, or
    one their embedder makes locally) asks them in turn with no thread hand-off each
    (:mod:`kairox.retrieval.composite_local`); beside other sources, it is asked on the
    event loop's thread while theirs run. A source that overruns its deadline that way is
    asked in a worker thread from then on.
    """

    name: str
    score_kind: ScoreKind

    async def retrieve(self, query: Query) -> list[Hit]: ...


#: Old names still answered, each with a DeprecationWarning, for one release.
_DEPRECATED_NAMES = {"WorkspaceRetriever": "Source"}

if TYPE_CHECKING:
    #: The old name of :class:`Source` (it serves knowledge bases as well as the workspace).
    WorkspaceRetriever = Source


def deprecated_name(module: str, name: str) -> Any:
    """The object an old name of ``module`` stands for, with a DeprecationWarning.

    Module ``__getattr__`` functions call this, so the warning points at the caller's line.
    """
    new = _DEPRECATED_NAMES.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated and goes in the next release: use {module}.{new} "
        "(the same protocol; it serves knowledge bases as well as the workspace)",
        DeprecationWarning,
        stacklevel=3,
    )
    return globals()[new]


def __getattr__(name: str) -> Any:
    return deprecated_name(__name__, name)
