"""What every engine's filter compiler needs: joining compiled parts of an ``$and`` or
``$or`` where some part may be "matches everything" or "matches nothing"."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["join_parts"]


def join_parts(
    parts: Iterable[Any], absorbing: Any, neutral: Any, combine: Callable[[list[Any]], Any]
) -> Any:
    """Join compiled filter ``parts``: an ``absorbing`` part decides the whole (nothing,
    in an ``$and``; everything, in an ``$or``), a ``neutral`` part drops out (the other
    way round), a single part stands alone and several are ``combine(parts)``; with
    none left, the ``neutral`` marker. The markers are compared by identity."""
    kept: list[Any] = []
    for part in parts:
        if part is absorbing:
            return absorbing
        if part is not neutral:
            kept.append(part)
    if not kept:
        return neutral
    return kept[0] if len(kept) == 1 else combine(kept)
