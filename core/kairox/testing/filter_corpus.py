"""The filter conformance corpus: 300 passages with typed metadata, and 60+ filters.

Every passage holds the word ``passage`` (so one query reaches them all) and metadata
of every type the language has: ``topic`` (strings, one of them unicode), ``year``
(integers), ``score`` (floats), ``draft`` (booleans), ``tags`` (lists of strings,
some empty), ``published`` (ISO dates), ``lang`` (missing on every 11th passage) and
``名前`` (a unicode field name, on every 4th). The expected ids of each filter come from
the reference evaluator, :func:`kairox.retrieval.filters.matches`.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from kairox.retrieval.filters import matches, parse_filter
from kairox.testing.corpus import CorpusDocument

__all__ = ["FILTER_CASES", "FILTER_CORPUS", "FilterCase", "expected_ids"]

_TOPICS = ("astronomy", "biology", "cooking", "programming", "history", "café")
_WORDS = {
    "astronomy": "orbit comet telescope",
    "biology": "cell enzyme protein",
    "cooking": "flour oven recipe",
    "programming": "compiler function loop",
    "history": "empire treaty century",
    "café": "espresso crème terrasse",
}
_TAGS = ("gpu", "cpu", "ml", "db", "web", "ünï")


def _metadata(i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "topic": _TOPICS[i % 6],
        "year": 2000 + (i * 7) % 25,
        "score": round((i * 37) % 100 / 10, 1),
        "draft": i % 5 == 0,
        "tags": [tag for j, tag in enumerate(_TAGS) if (i * (j + 3) + j) % 7 == 0],
        "published": (date(2015, 1, 1) + timedelta(days=i * 13)).isoformat(),
        "rank": i,
    }
    if i % 11 != 0:
        meta["lang"] = ("en", "de", "fr")[i % 3]
    if i % 4 == 0:
        meta["名前"] = f"値{i % 3}"
    return meta


def _document(i: int) -> CorpusDocument:
    meta = _metadata(i)
    topic = meta["topic"]
    return CorpusDocument(
        f"f{i:03d}",
        f"Passage {i} on {topic}",
        f"This passage {i} is about {topic}: {_WORDS[topic]}.",
        meta,
    )


FILTER_CORPUS: tuple[CorpusDocument, ...] = tuple(_document(i) for i in range(300))

#: (name, filter in JSON or text form); names are stable for ``filter_refuses``.
FilterCase = tuple[str, Any]

FILTER_CASES: tuple[FilterCase, ...] = (
    ("eq-string", {"topic": "cooking"}),
    ("eq-string-op", {"topic": {"$eq": "biology"}}),
    ("eq-unicode-value", {"topic": "café"}),
    ("eq-int", {"year": 2010}),
    ("eq-float", {"score": 3.7}),
    ("eq-int-as-float", {"year": 2010.0}),
    ("eq-true", {"draft": True}),
    ("eq-false", {"draft": False}),
    ("eq-no-match", {"topic": "geology"}),
    ("ne-string", {"topic": {"$ne": "cooking"}}),
    ("ne-missing-field", {"lang": {"$ne": "en"}}),
    ("ne-bool", {"draft": {"$ne": True}}),
    ("gt-int", {"year": {"$gt": 2020}}),
    ("gte-int", {"year": {"$gte": 2020}}),
    ("lt-int", {"year": {"$lt": 2003}}),
    ("lte-int", {"year": {"$lte": 2003}}),
    ("range-int", {"year": {"$gte": 2005, "$lt": 2010}}),
    ("gt-float", {"score": {"$gt": 8.5}}),
    ("lte-float", {"score": {"$lte": 0.5}}),
    ("range-float-int-bound", {"score": {"$gte": 2, "$lte": 3}}),
    ("range-empty", {"year": {"$gt": 2030}}),
    ("in-strings", {"topic": {"$in": ["astronomy", "history"]}}),
    ("in-legacy-list", {"topic": ["biology", "programming"]}),
    ("in-ints", {"year": {"$in": [2001, 2002, 2024]}}),
    ("in-empty", {"topic": {"$in": []}}),
    ("in-missing-field", {"lang": {"$in": ["de", "fr"]}}),
    ("nin-strings", {"topic": {"$nin": ["astronomy", "history"]}}),
    ("nin-missing-field", {"lang": {"$nin": ["en"]}}),
    ("nin-ints", {"year": {"$nin": [2000, 2001]}}),
    ("exists-true", {"lang": {"$exists": True}}),
    ("exists-false", {"lang": {"$exists": False}}),
    ("exists-absent-field", {"nowhere": {"$exists": True}}),
    ("contains", {"tags": {"$contains": "gpu"}}),
    ("contains-unicode", {"tags": {"$contains": "ünï"}}),
    ("contains-none", {"tags": {"$contains": "tpu"}}),
    ("and", {"$and": [{"topic": "cooking"}, {"year": {"$gte": 2012}}]}),
    ("and-implicit", {"topic": "history", "draft": False}),
    ("or", {"$or": [{"topic": "cooking"}, {"year": {"$lt": 2002}}]}),
    ("or-three", {"$or": [{"lang": "de"}, {"draft": True}, {"score": {"$gt": 9}}]}),
    ("not-eq", {"$not": {"topic": "cooking"}}),
    ("not-in", {"$not": {"lang": {"$in": ["en", "de"]}}}),
    ("not-range", {"$not": {"year": {"$gte": 2010}}}),
    ("not-range-missing", {"$not": {"lang": {"$eq": "en"}}}),
    ("not-and", {"$not": {"$and": [{"topic": "biology"}, {"draft": False}]}}),
    ("not-or", {"$not": {"$or": [{"topic": "biology"}, {"year": {"$lt": 2012}}]}}),
    ("not-not", {"$not": {"$not": {"topic": "history"}}}),
    ("not-contains", {"$not": {"tags": {"$contains": "ml"}}}),
    ("not-exists", {"$not": {"lang": {"$exists": True}}}),
    (
        "nested",
        {
            "$or": [
                {"$and": [{"topic": "astronomy"}, {"year": {"$gte": 2015}}]},
                {"$and": [{"lang": "fr"}, {"$not": {"draft": True}}, {"score": {"$lt": 4}}]},
            ]
        },
    ),
    (
        "deep",
        {"$and": [{"$or": [{"$and": [{"$or": [{"year": 2004}, {"year": 2011}]}]}]}]},
    ),
    ("date-gte", {"published": {"$gte": "2020-01-01"}}),
    ("date-lt", {"published": {"$lt": "2016-06-30"}}),
    ("date-range", {"published": {"$gte": "2017-01-01", "$lte": "2017-12-31T23:59:59Z"}}),
    ("date-eq", {"published": "2015-01-14"}),
    ("date-not-range", {"$not": {"published": {"$gt": "2021-01-01"}}}),
    ("unicode-field", {"名前": "値1"}),
    ("unicode-field-exists", {"名前": {"$exists": False}, "topic": "cooking"}),
    ("text-form", "year >= 2020 and lang in (en, de) and not draft"),
    ("text-form-or", "topic = café or (score > 9.5 and tags contains db)"),
    ("text-form-missing", "lang missing or lang != fr"),
    ("text-quoted", 'topic = "history" and year < 2006'),
    ("selective", {"rank": {"$in": [3, 141, 299]}}),
    ("everything-but-one", {"rank": {"$ne": 150}}),
    ("all-false", {"$and": [{"draft": True}, {"draft": False}]}),
)

#: Cases needing a feature some engines lack, by feature (for ``filter_refuses``).
DATE_RANGE_CASES = frozenset({"date-gte", "date-lt", "date-range", "date-not-range"})
UNICODE_FIELD_CASES = frozenset({"unicode-field", "unicode-field-exists"})


def expected_ids(spec: Any, documents: tuple[CorpusDocument, ...] = FILTER_CORPUS) -> set[str]:
    """The ids of ``documents`` whose metadata satisfies ``spec`` (reference evaluator)."""
    expr = parse_filter(spec)
    return {doc.id for doc in documents if matches(expr, doc.metadata)}
