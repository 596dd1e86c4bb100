"""One metadata filter language for every source, compiled per engine.

The canonical JSON form (in the style of Pinecone and MongoDB)::

    {"lang": "en"}                          equality ($eq)
    {"lang": ["en", "de"]}                  any of ($in; the equality subset of old releases)
    {"year": {"$gte": 2020, "$lt": 2024}}   $eq $ne $gt $gte $lt $lte (two conditions, ANDed)
    {"lang": {"$in": ["en", "de"]}}         $in $nin (at most MAX_IN values of one kind)
    {"lang": {"$exists": true}}             present and not null
    {"tags": {"$contains": "gpu"}}          a list-of-strings field holds the string
    {"$and": [...]} {"$or": [...]} {"$not": {...}}

Values are strings, numbers (integers within +-2**53, finite floats) and booleans;
range bounds are numbers or ISO dates (``2021-03-04``, ``2021-03-04T10:00:00Z``), and
dates compare as dates. :func:`parse_filter` turns the JSON form, or the text form
(:mod:`kairox.retrieval.filters.text`), into one validated :data:`FilterExpr`;
:func:`matches` is the reference evaluator (:mod:`.evaluate` states the rules).
"""

from kairox.retrieval.filters.canonical import describe, to_canonical
from kairox.retrieval.filters.evaluate import matches
from kairox.retrieval.filters.model import (
    COMBINATORS,
    COMPARISONS,
    OPERATORS,
    RANGES,
    And,
    Condition,
    FilterError,
    FilterExpr,
    Not,
    Or,
    Scalar,
    operators_of,
)
from kairox.retrieval.filters.parse import MAX_DEPTH, MAX_IN, MAX_NODES, as_date, parse_filter
from kairox.retrieval.filters.support import (
    ALL_OPERATORS,
    FilterSupport,
    FilterUnsupportedError,
    conditions,
)
from kairox.retrieval.filters.text import parse_text

__all__ = [
    "ALL_OPERATORS",
    "COMBINATORS",
    "COMPARISONS",
    "MAX_DEPTH",
    "MAX_IN",
    "MAX_NODES",
    "OPERATORS",
    "RANGES",
    "And",
    "Condition",
    "FilterError",
    "FilterExpr",
    "FilterSupport",
    "FilterUnsupportedError",
    "Not",
    "Or",
    "Scalar",
    "all_of",
    "as_date",
    "conditions",
    "describe",
    "matches",
    "operators_of",
    "parse_filter",
    "parse_text",
    "to_canonical",
]


def all_of(*exprs: FilterExpr | None) -> FilterExpr | None:
    """Every given filter must hold (``None`` ones are ignored)."""
    present = [e for e in exprs if e is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else And(tuple(present))
