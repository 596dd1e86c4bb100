"""What one run did (``kairox index``, ``kairox kb ingest``, ``kairox kb sync``), as JSON.

:class:`RunStats` is the base of each run's statistics: its :meth:`~RunStats.as_json` gives
every field in declaration order (a field's metadata may say how: :data:`HIDDEN`,
:data:`TALLY`, :data:`PATH_WHYS`), so a subclass declares its counts and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

__all__ = ["HIDDEN", "PATH_WHYS", "TALLY", "ChangeCounts", "RunStats"]

# Field metadata: how as_json prints the field (absent: as it is).
_PRINT = "kairox_print"
_HIDDEN = object()


def _sorted_tally(counts: dict[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items()))


def _path_why_objects(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"path": path, "why": why} for path, why in pairs]


#: ``field(default_factory=list, metadata=HIDDEN)``: kept for callers, left out of as_json.
HIDDEN: Mapping[str, Any] = MappingProxyType({_PRINT: _HIDDEN})
#: A ``{reason: count}`` field's metadata: printed sorted by reason.
TALLY: Mapping[str, Any] = MappingProxyType({_PRINT: _sorted_tally})
#: A ``[(path, why)]`` field's metadata: printed as ``[{"path": ..., "why": ...}]``.
PATH_WHYS: Mapping[str, Any] = MappingProxyType({_PRINT: _path_why_objects})


@dataclass
class RunStats:
    """The base of a run's statistics: its counts are the fields, printed in order."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in fields(self):
            how = spec.metadata.get(_PRINT)
            if how is _HIDDEN:
                continue
            value = getattr(self, spec.name)
            out[spec.name] = value if how is None else how(value)
        return out


@dataclass
class ChangeCounts(RunStats):
    """A run that writes inputs (``kairox index``, ``kairox kb ingest``): how many it added
    and how many it updated, its first counts; a subclass declares the rest."""

    added: int = 0
    updated: int = 0
