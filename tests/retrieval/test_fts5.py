"""Safe FTS5 terms from any text, with or without stop words."""

from __future__ import annotations

from kairox.retrieval.fts5 import match_expression, match_terms
from kairox.retrieval.stop_words import ENGLISH_STOP_WORDS


def test_terms_are_distinct_quoted_and_case_folded() -> None:
    assert match_terms('Cell "cell" AND-not*') == ['"cell"', '"and"', '"not"']
    assert match_expression("a NEAR(b)") == '"a" OR "near" OR "b"'
    assert match_expression("?!") is None


def test_stop_words_are_left_out_unless_nothing_else_is_left() -> None:
    assert match_terms("When did Ann adopt the puppy?", ENGLISH_STOP_WORDS) == [
        '"ann"',
        '"adopt"',
        '"puppy"',
    ]
    assert match_terms("What did you do?", ENGLISH_STOP_WORDS) == [
        '"what"',
        '"did"',
        '"you"',
        '"do"',
    ]
