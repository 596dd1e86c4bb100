"""The one check of what ``embed()`` is given, shared by every backend of this plugin."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["texts_to_embed"]


def texts_to_embed(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or a ``TypeError`` for a lone string (a common slip) or an
    item that is not a string."""
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of strings; wrap a single text in a list")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] is a {type(text).__name__}, expected str")
    return items
