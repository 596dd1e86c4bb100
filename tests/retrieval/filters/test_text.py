"""The text form: its grammar, and that it means what the JSON form means."""

from __future__ import annotations

import pytest

from kairox.retrieval.filters import FilterError, parse_filter, parse_text


@pytest.mark.parametrize(
    ("text", "json"),
    [
        ("year >= 2020", {"year": {"$gte": 2020}}),
        ("lang in (en, de)", {"lang": {"$in": ["en", "de"]}}),
        ("lang not in (en)", {"lang": {"$nin": ["en"]}}),
        ("not draft", {"$not": {"draft": True}}),
        ("draft = false", {"draft": False}),
        ("score < 2.5", {"score": {"$lt": 2.5}}),
        ("tags contains gpu", {"tags": {"$contains": "gpu"}}),
        ("lang exists", {"lang": {"$exists": True}}),
        ("lang missing", {"lang": {"$exists": False}}),
        ("published > 2021-03-04", {"published": {"$gt": "2021-03-04"}}),
        ('title = "a b \\" c"', {"title": 'a b " c'}),
        ("'my field' != 'x'", {"my field": {"$ne": "x"}}),
        ("名前 = 値", {"名前": "値"}),
        ("a = 1 or b = 2 and c = 3", {"$or": [{"a": 1}, {"$and": [{"b": 2}, {"c": 3}]}]}),
        ("(a = 1 or b = 2) and c = 3", {"$and": [{"$or": [{"a": 1}, {"b": 2}]}, {"c": 3}]}),
        ("A = 1 AND NOT B", {"$and": [{"A": 1}, {"$not": {"B": True}}]}),
        ('x = "and"', {"x": "and"}),
        ("x = -3", {"x": -3}),
    ],
)
def test_text_compiles_to_the_same_expression(text, json):
    assert parse_text(text) == parse_filter(json)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("year >", "expected a value, found the end"),
        ("(a = 1", "expected ')'"),
        ("a = 1 b = 2", "'and', 'or' or the end"),
        ("and", "expected a field name"),
        ("a in 1", "expected '('"),
        ('a = "open', "unexpected '\"'"),
        ("a ~ 1", "expected an operator"),
        ("year > abc", "ISO dates"),
        ("a in (1, x)", "one kind"),
    ],
)
def test_bad_text_says_where_and_what_may_come(text, says):
    with pytest.raises(FilterError) as caught:
        parse_text(text)
    assert says in str(caught.value)


def test_blank_text_is_no_filter():
    assert parse_text("   ") is None
