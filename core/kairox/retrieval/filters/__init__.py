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

# Each module lists what it exports (its __all__) and the package re-exports all of it,
# as asyncio does, so a name is listed once, beside its definition.
from kairox.retrieval.filters import (
    canonical,
    compiling,
    evaluate,
    mapping,
    model,
    parse,
    support,
    text,
)
from kairox.retrieval.filters.canonical import *  # noqa: F403
from kairox.retrieval.filters.compiling import *  # noqa: F403
from kairox.retrieval.filters.evaluate import *  # noqa: F403
from kairox.retrieval.filters.mapping import *  # noqa: F403
from kairox.retrieval.filters.model import *  # noqa: F403
from kairox.retrieval.filters.model import And, FilterExpr
from kairox.retrieval.filters.parse import *  # noqa: F403
from kairox.retrieval.filters.support import *  # noqa: F403
from kairox.retrieval.filters.text import *  # noqa: F403

__all__ = [
    *canonical.__all__,
    *compiling.__all__,
    *evaluate.__all__,
    *mapping.__all__,
    *model.__all__,
    *parse.__all__,
    *support.__all__,
    *text.__all__,
    "all_of",
]


def all_of(*exprs: FilterExpr | None) -> FilterExpr | None:
    """Every given filter must hold (``None`` ones are ignored)."""
    present = [e for e in exprs if e is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else And(tuple(present))
