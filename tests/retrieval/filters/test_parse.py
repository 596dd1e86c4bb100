"""The JSON form: what parses into which expression, and every refusal's path and hint."""

from __future__ import annotations

import pytest

from kairox.retrieval import Query, QueryError
from kairox.retrieval.filters import (
    MAX_DEPTH,
    MAX_IN,
    And,
    Condition,
    FilterError,
    Not,
    Or,
    describe,
    parse_filter,
    to_canonical,
)


def test_equality_and_any_of_are_the_old_subset():
    assert parse_filter({"lang": "en"}) == Condition("lang", "$eq", "en")
    assert parse_filter({"lang": ["en", "de"]}) == Condition("lang", "$in", ("en", "de"))
    assert parse_filter({"a": 1, "b": True}) == And(
        (Condition("a", "$eq", 1), Condition("b", "$eq", True))
    )
    assert parse_filter({}) is None and parse_filter(None) is None


def test_operators_and_combinators():
    expr = parse_filter(
        {"$or": [{"year": {"$gte": 2020, "$lt": 2024}}, {"$not": {"tags": {"$contains": "x"}}}]}
    )
    assert expr == Or(
        (
            And((Condition("year", "$gte", 2020), Condition("year", "$lt", 2024))),
            Not(Condition("tags", "$contains", "x")),
        )
    )
    assert parse_filter(to_canonical(expr)) == expr  # the canonical form round-trips


@pytest.mark.parametrize(
    ("spec", "path", "says"),
    [
        ({"$nor": []}, "filter.$nor", "allowed: $and, $or, $not"),
        ({"$gt": 1}, "filter.$gt", "go inside a field"),
        ({"a": {"$like": 1}}, "filter.a.$like", "allowed: $contains"),
        ({"$and": [{"a": 1}, {"b": {"$gt": "x"}}]}, "filter.$and[1].b.$gt", "ISO dates"),
        ({"a": {"$in": "x"}}, "filter.a.$in", "list of values"),
        ({"a": {"$in": [1, "x"]}}, "filter.a.$in", "one kind"),
        ({"a": {"$exists": 1}}, "filter.a.$exists", "true or false"),
        ({"a": {"$contains": 3}}, "filter.a.$contains", "one string"),
        ({"a": None}, "filter.a", "got null"),
        ({"a": {"x": 1}}, "filter.a.x", "unknown operator"),
        ({"a": float("inf")}, "filter.a", "finite"),
        ({"a": 2**60}, "filter.a", "2**53"),
        ({"": 1}, "filter.", "1 to 256"),
        ({"a\x00b": 1}, "filter.a\x00b", "control"),
        ({"$not": {}}, "filter.$not", "non-empty"),
        ({"$or": [{}]}, "filter.$or[0]", "empty filter"),
        ([1], "filter", "expected an object"),
        ({"a": {}}, "filter.a", "empty operator object"),
    ],
)
def test_refusals_name_the_node_and_what_is_allowed(spec, path, says):
    with pytest.raises(FilterError) as caught:
        parse_filter(spec)
    assert caught.value.path == path
    assert says in str(caught.value)


def test_limits():
    deep: dict = {"a": 1}
    for _ in range(MAX_DEPTH + 2):
        deep = {"$not": deep}
    with pytest.raises(FilterError, match="nested deeper"):
        parse_filter(deep)
    with pytest.raises(FilterError, match=f"at most {MAX_IN}"):
        parse_filter({"a": {"$in": list(range(MAX_IN + 1))}})
    with pytest.raises(FilterError, match="more than 512"):
        parse_filter({"$or": [{"a": i} for i in range(600)]})


def test_a_query_refuses_a_bad_filter_before_any_source_is_asked():
    with pytest.raises(QueryError):  # FilterError is a QueryError
        Query("x", filters={"a": {"$bad": 1}})
    query = Query("x", filters="year >= 2020")
    assert query.filter == Condition("year", "$gte", 2020)
    assert describe(query.filter) == '{"year": {"$gte": 2020}}'


def test_a_string_holding_a_json_object_is_the_json_form():
    # What an MCP client, a shell or a LangChain caller hands over as text.
    spec = {"$or": [{"year": {"$gte": 2020}}, {"lang": ["en", "de"]}]}
    assert parse_filter(' {"$or": [{"year": {"$gte": 2020}}, {"lang": ["en", "de"]}]}') == (
        parse_filter(spec)
    )
    with pytest.raises(FilterError, match=r"not valid JSON \(Expecting"):
        parse_filter('{"path": "notes.md"')
    with pytest.raises(FilterError, match="nested deeper"):
        parse_filter('{"$not": ' * 5000 + '{"a": 1}' + "}" * 5000)
