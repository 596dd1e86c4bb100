"""The reference evaluator's rules, and the SQL compiler agreeing with it row by row."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox.retrieval.filters import matches, parse_filter
from kairox.retrieval.filters.sql import compile_sql, register_functions

ROW = {"s": "x", "n": 3, "f": 2.5, "b": True, "l": ["a", "b"], "d": "2021-03-04", "z": None}


@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        ({"n": 3.0}, True),
        ({"n": "3"}, False),  # typed: the string is not the number
        ({"b": 1}, False),  # booleans are not numbers
        ({"missing": {"$ne": 1}}, True),
        ({"missing": {"$nin": [1]}}, True),
        ({"missing": {"$gt": 1}}, False),
        ({"$not": {"missing": {"$gt": 1}}}, True),
        ({"z": {"$exists": True}}, False),  # null is not there
        ({"l": {"$contains": "a"}}, True),
        ({"s": {"$contains": "x"}}, False),  # only lists contain
        ({"d": {"$gt": "2021-03-03T23:00:00-02:00"}}, False),  # instants, not strings
        ({"d": {"$gte": "2021-03-04T00:00:00Z"}}, True),
        ({"s": {"$gt": "2020-01-01"}}, False),  # not a date
        ({"f": {"$gte": 2, "$lt": 3}}, True),
    ],
)
def test_rules(spec, holds):
    assert matches(parse_filter(spec), ROW) is holds


_values = st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "2021-01-01"]), st.booleans())
_metadata = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.one_of(_values, st.lists(st.sampled_from(["a", "b"]), max_size=2), st.none()),
    max_size=3,
)


@st.composite
def _filters(draw, depth=0):
    if depth < 2 and draw(st.booleans()):
        op = draw(st.sampled_from(["$and", "$or", "$not"]))
        if op == "$not":
            return {op: draw(_filters(depth + 1))}
        return {op: draw(st.lists(_filters(depth + 1), min_size=1, max_size=3))}
    field = draw(st.sampled_from(["a", "b", "c", "名"]))
    op = draw(st.sampled_from(["$eq", "$ne", "$gt", "$lte", "$in", "$nin", "$exists", "$contains"]))
    if op in ("$in", "$nin"):
        kind = draw(st.sampled_from([st.integers(-5, 5), st.sampled_from(["a", "b"])]))
        return {field: {op: draw(st.lists(kind, max_size=3))}}
    if op == "$exists":
        return {field: {op: draw(st.booleans())}}
    if op == "$contains":
        return {field: {op: draw(st.sampled_from(["a", "b"]))}}
    if op in ("$gt", "$lte"):
        return {field: {op: draw(st.one_of(st.integers(-5, 5), st.just("2021-01-01")))}}
    return {field: {op: draw(_values)}}


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_metadata, min_size=1, max_size=8), spec=_filters())
def test_sql_selects_what_the_evaluator_selects(rows, spec):
    db = sqlite3.connect(":memory:")
    register_functions(db)
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, m TEXT)")
    db.executemany("INSERT INTO t (m) VALUES (?)", [(json.dumps(r),) for r in rows])
    expr = parse_filter(spec)
    sql, params = compile_sql(expr, "t.m")
    got = {row[0] for row in db.execute(f"SELECT id FROM t WHERE {sql}", params)}
    want = {i + 1 for i, r in enumerate(rows) if matches(expr, r)}
    assert got == want, (spec, rows)
