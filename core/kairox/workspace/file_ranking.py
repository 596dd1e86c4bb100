"""Ranking workspace hits as the files a developer means.

Fused chunk hits are re-scored before they are cut to ``k``:

1. each hit of a workspace file is weighted by its file's **role**
   (:mod:`kairox.workspace.file_roles`): implementation 1.0, tests, docs and changelogs
   less, unless the query asks for that role, which then counts ``asked_role_weight``
   (1.5: above implementation, so "the tests for digest auth" lists the tests first);
   such a query also lifts the files of that role whose path spells its other words
   (``asked_path_bonus``: "docs on proxies" means ``docs/advanced/proxies.md``);
2. a file is ranked by the **evidence of all its chunks**, not its best one alone: its
   best chunk's score plus ``file_evidence`` times the rest, each further chunk counting
   less (1/2, 1/3, ...); the file's best chunk carries the file's score (its other
   chunks keep their own), so the hit list reduced to files comes out in file order.

:func:`by_file` then keeps one hit per file (its best chunk, with the file's line range
and chunk count) for callers that want files. Hits without a workspace path (a knowledge
base's) keep their scores, and the workspace's are scaled so that its best file scores
what its best hit did: the balance with the knowledge bases stays as fusion set it. The
weights come from ``[workspace]`` (``role_weights``, ``asked_role_weight``,
``asked_path_bonus``, ``file_evidence``);
benchmarks/README.md has the figures behind the defaults.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kairox.retrieval.model import FusedHit
from kairox.retrieval.stop_words import ENGLISH_STOP_WORDS
from kairox.workspace.file_roles import ROLE_QUERY_WORDS, Role, asked_roles, role_of

__all__ = [
    "ASKED_PATH_BONUS",
    "ASKED_ROLE_WEIGHT",
    "DEFAULT_ROLE_WEIGHTS",
    "FileRanking",
    "by_file",
]

#: How much a hit of each role counts against an implementation file's (1.0) when the
#: query does not ask for the role; tuned on the git-history development set.
DEFAULT_ROLE_WEIGHTS: Mapping[str, float] = {
    Role.IMPLEMENTATION: 1.0,
    Role.TEST: 0.2,
    Role.DOCS: 0.25,
    Role.CHANGELOG: 0.1,
    Role.EXAMPLE: 0.25,
    Role.BENCHMARK: 0.25,
    Role.CONFIG: 0.25,
    Role.GENERATED: 0.1,
    Role.VENDORED: 0.2,
}

#: What a role the query names counts (at least): above implementation, so that a user who
#: asks for the tests or the docs gets them first; 1.5 costs 0.006 MRR@10 on the history
#: benchmark's train half, whose subjects rarely mean the role they name ("add a test").
ASKED_ROLE_WEIGHT = 1.5
#: When the query names a role, each of its other words that the path of a file of that
#: role spells (at most two) multiplies the file's hits by ``1 + ASKED_PATH_BONUS``: among
#: the files of the role asked for, the one named after the topic comes first
#: (benchmarks/README.md: role questions at rank 1 10 -> 14 of 19).
ASKED_PATH_BONUS = 1.0
_MOST_PATH_WORDS = 2
_WORD = re.compile(r"[a-z0-9]+")
#: Words compared by their first letters, so that "proxies" finds ``proxy.py`` and
#: "filter" ``filters.md``.
_PREFIX = 5


@dataclass(frozen=True)
class FileRanking:
    """How workspace hits are re-scored as files (see the module docs).

    :param role_weights: a multiplier per role (a :class:`Role` value); roles left out
        count 1.0.
    :param asked_role_weight: what a role the query names counts at least (1.0: as much
        as implementation; more: ahead of it).
    :param asked_path_bonus: when the query names a role, what each of its other words
        that the path of a file of that role spells adds to the file's multiplier (0:
        nothing).
    :param file_evidence: how much a file's further chunks add to its best one (0: the
        best chunk alone ranks the file).
    :param sources: the names of the sources whose hits are workspace files; ``None``:
        any hit with a ``path`` in its metadata.
    """

    role_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_ROLE_WEIGHTS))
    asked_role_weight: float = ASKED_ROLE_WEIGHT
    asked_path_bonus: float = ASKED_PATH_BONUS
    file_evidence: float = 0.2
    sources: frozenset[str] | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.role_weights) - {role.value for role in Role})
        if unknown:
            known = ", ".join(role.value for role in Role)
            raise ValueError(f"role_weights names unknown roles {unknown}; the roles are {known}")
        for role, weight in self.role_weights.items():
            if not weight >= 0:
                raise ValueError(f"role_weights[{role!r}] must be >= 0, got {weight!r}")
        if not self.asked_role_weight >= 0:
            raise ValueError(f"asked_role_weight must be >= 0, got {self.asked_role_weight!r}")
        if not self.asked_path_bonus >= 0:
            raise ValueError(f"asked_path_bonus must be >= 0, got {self.asked_path_bonus!r}")
        if not self.file_evidence >= 0:
            raise ValueError(f"file_evidence must be >= 0, got {self.file_evidence!r}")

    def weights_for(self, query: str) -> dict[str, float]:
        """Each role's multiplier for ``query`` (a role it names counts at least
        ``asked_role_weight``)."""
        weights = {role.value: float(self.role_weights.get(role.value, 1.0)) for role in Role}
        for role in asked_roles(query):
            weights[role.value] = max(weights[role.value], self.asked_role_weight)
        return weights

    def _topic_words(self, query: str) -> list[str]:
        """The words of a query that names a role, less the words that name roles and the
        stop words, cut to their first letters (none for a query that names no role)."""
        if not self.asked_path_bonus or not asked_roles(query):
            return []
        asking = frozenset().union(*ROLE_QUERY_WORDS.values())
        return [
            word[:_PREFIX]
            for word in dict.fromkeys(_WORD.findall(query.casefold()))
            if len(word) > 2 and word not in asking and word not in ENGLISH_STOP_WORDS
        ]

    def _path_lift(self, path: str, topic: Sequence[str]) -> float:
        if not topic:
            return 1.0
        parts = [part[:_PREFIX] for part in _WORD.findall(path.rsplit(".", 1)[0].casefold())]
        found = sum(
            1
            for word in topic
            if any(p.startswith(word) or word.startswith(p) for p in parts if len(p) > 2)
        )
        return 1.0 + self.asked_path_bonus * min(found, _MOST_PATH_WORDS)

    def _path(self, hit: FusedHit) -> str | None:
        if self.sources is not None and not any(p.source in self.sources for p in hit.sources):
            return None
        path = hit.metadata.get("path")
        return path if isinstance(path, str) else None

    def rescore(self, query: str, hits: Sequence[FusedHit]) -> list[FusedHit]:
        """``hits`` re-scored and re-sorted (best first): role priors, then file evidence."""
        weights = self.weights_for(query)
        asked, topic = asked_roles(query), self._topic_words(query)
        weighted: list[tuple[FusedHit, str | None, float]] = []
        for hit in hits:
            path = self._path(hit)
            weight = 1.0
            if path is not None:
                role = role_of(path)
                weight = weights[role]
                if role in asked:
                    weight *= self._path_lift(path, topic)
            weighted.append((hit, path, hit.score * weight))
        if all(path is None for _, path, _ in weighted) and all(
            before.score >= after.score for before, after in itertools.pairwise(hits)
        ):
            # No workspace file among them, already best first: every score stays, and
            # the order with it (ties keep their order, as the sort below keeps them).
            return list(hits)
        # A file's chunks, best first: its score is the best plus the decayed rest.
        chunks: dict[str, list[float]] = {}
        best_of: dict[str, int] = {}
        for order, (_, path, score) in enumerate(weighted):
            if path is None:
                continue
            chunks.setdefault(path, []).append(score)
            if path not in best_of or score > weighted[best_of[path]][2]:
                best_of[path] = order
        file_score = {
            path: _evidence(sorted(scores, reverse=True), self.file_evidence)
            for path, scores in chunks.items()
        }
        # Rescaled so that the best workspace file scores what the best workspace hit
        # did: the priors order the workspace's files among themselves, and leave the
        # balance between the workspace and the knowledge bases as fusion set it.
        best_before = max((hit.score for hit, path, _ in weighted if path is not None), default=0)
        best_after = max(file_score.values(), default=0)
        scale = best_before / best_after if best_after > 0 else 1.0
        # A file's best chunk carries the file's score, its other chunks their own (never
        # more): reduced to files, the list is in file order, and a file with many
        # matching chunks does not crowd the others out of a short list.
        rescored = []
        for order, (hit, path, score) in enumerate(weighted):
            if path is not None:
                score = scale * (file_score[path] if best_of[path] == order else score)
            rescored.append((score, order, dataclasses.replace(hit, score=score)))
        # The fused order breaks ties (it is deterministic already).
        rescored.sort(key=lambda row: (-row[0], row[1]))
        return [row[2] for row in rescored]


def _evidence(scores: Sequence[float], weight: float) -> float:
    return scores[0] + weight * sum(s / rank for rank, s in enumerate(scores[1:], start=2))


def by_file(hits: Sequence[FusedHit]) -> list[FusedHit]:
    """One hit per file, in order: each file's first (best) hit, its metadata extended
    with ``file_chunks`` (how many of the hits are of that file) and ``file_lines`` (the
    first and last line those hits cover, when they say). Hits without a path stay."""
    firsts: dict[str, int] = {}
    out: list[FusedHit] = []
    counts: dict[str, int] = {}
    spans: dict[str, list[int]] = {}
    for hit in hits:
        path = hit.metadata.get("path")
        if not isinstance(path, str):
            out.append(hit)
            continue
        counts[path] = counts.get(path, 0) + 1
        start, end = hit.metadata.get("line_start"), hit.metadata.get("line_end")
        if isinstance(start, int) and isinstance(end, int) and start > 0:
            span = spans.setdefault(path, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
        if path not in firsts:
            firsts[path] = len(out)
            out.append(hit)
    for path, at in firsts.items():
        extra: dict[str, Any] = {"file_chunks": counts[path]}
        if path in spans:
            extra["file_lines"] = tuple(spans[path])
        out[at] = dataclasses.replace(out[at], metadata={**out[at].metadata, **extra})
    return out
