"""A filter in any of its forms (the canonical JSON form, its JSON text, the text form or
an expression) as one validated :data:`FilterExpr`: the one entry every source uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kairox.retrieval.filters.mapping import parse_json, parse_mapping
from kairox.retrieval.filters.model import And, Condition, FilterExpr, Not, Or
from kairox.retrieval.filters.text import parse_text

__all__ = ["parse_filter"]


def parse_filter(spec: Mapping[str, Any] | FilterExpr | str | None) -> FilterExpr | None:
    """A filter in its canonical JSON form (or the text form, or an expression) as one
    validated expression; ``None`` for no filter (``None`` or ``{}``).

    A string is the text form, or the JSON text of the canonical form when it starts
    with ``{`` (what an MCP client, a shell or a config value hands over).

    :raises FilterError: naming the bad node's path and what is allowed there.
    """
    if spec is None:
        return None
    if isinstance(spec, Condition | And | Or | Not):
        return spec
    if isinstance(spec, str):
        if spec.lstrip().startswith("{"):
            return parse_json(spec)
        return parse_text(spec)
    return parse_mapping(spec)
