"""The conformance suite catches broken plugins (run in a nested pytest via pytester)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SOURCE_MODULE = """
import re, pytest
from kairox.retrieval import Hit, Query, ScoreKind
from kairox.testing import CORPUS, SourceConformance

def words(text):
    return set(re.findall(r"\\w+", text.casefold()))

def allowed(doc, filters):
    for key, wanted in filters.items():
        if doc.metadata.get(key) not in (wanted if isinstance(wanted, list) else [wanted]):
            return False
    return True

class Source:
    name = "under-test"
    score_kind = ScoreKind.BM25

    def __init__(self, broken=False):
        self.broken = broken

    async def retrieve(self, query):
        if self.broken:
            raise ConnectionError("index server at 127.0.0.1:9 refused the connection")
        asked = words(query.text)
        scored = []
        for doc in CORPUS:
            overlap = len(asked & words(f"{{doc.title}} {{doc.text}}"))
            if overlap and allowed(doc, query.filters):
                scored.append((overlap, doc))
        scored.sort(key=lambda pair: -pair[0])
        return [Hit(d.id, d.text, float(s), self.name, d.uri, d.metadata) for s, d in scored[:query.k]]

{mutation}

class TestSource(SourceConformance):
    @pytest.fixture
    def conformance_source(self):
        return Source()

    @pytest.fixture
    def broken_source(self):
        return Source(broken=True)
"""


def run_suite(pytester, mutation=""):
    pytester.makepyfile(test_source=SOURCE_MODULE.format(mutation=mutation))
    return pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")


def test_a_sound_source_passes(pytester):
    result = run_suite(pytester)
    assert result.ret == 0, result.stdout.str()
    assert result.parseoutcomes()["passed"] >= 40


@pytest.mark.parametrize(
    ("mutation", "failing_test"),
    [
        (
            "_orig = Source.retrieve\n"
            "async def _worst_first(self, q):\n"
            "    return list(reversed(await _orig(self, q)))\n"
            "Source.retrieve = _worst_first",
            "test_hits_are_well_formed_and_best_first",
        ),
        (
            "_orig = Source.retrieve\n"
            "async def _ignores_k(self, q):\n"
            "    from kairox.retrieval import Query\n"
            "    return await _orig(self, Query(q.text, 50, q.filters))\n"
            "Source.retrieve = _ignores_k",
            "test_respects_k",
        ),
        (
            "_orig = Source.retrieve\n"
            "async def _crashes(self, q):\n"
            "    if self.broken:\n"
            "        return {}['missing']\n"
            "    return await _orig(self, q)\n"
            "Source.retrieve = _crashes",
            "test_failure_raises_a_clear_error",
        ),
        (
            "_orig = Source.retrieve\n"
            "async def _no_filters(self, q):\n"
            "    from kairox.retrieval import Query\n"
            "    return await _orig(self, Query(q.text, q.k))\n"
            "Source.retrieve = _no_filters",
            "test_filters_restrict_hits",
        ),
        (
            "_orig = Source.retrieve\n"
            "async def _chokes(self, q):\n"
            "    if '\"' in q.text:\n"
            "        raise SyntaxError('fts5: syntax error near \"')\n"
            "    return await _orig(self, q)\n"
            "Source.retrieve = _chokes",
            "test_accepts_anything_a_user_can_type",
        ),
        (
            "_orig = Source.retrieve\n"
            "async def _ascii_only(self, q):\n"
            "    q.text.encode('ascii')\n"
            "    return await _orig(self, q)\n"
            "Source.retrieve = _ascii_only",
            "test_any_unicode_query_returns_hits_or_a_query_error",
        ),
    ],
    ids=["worst-first", "ignores-k", "bug-error", "no-filters", "hostile-query", "ascii-only"],
)
def test_the_suite_catches_a_broken_source(pytester, mutation, failing_test):
    result = run_suite(pytester, mutation)
    assert result.ret != 0
    failed = [line for line in result.outlines if line.startswith("FAILED")]
    assert any(failing_test in line for line in failed), "\n".join(failed)
