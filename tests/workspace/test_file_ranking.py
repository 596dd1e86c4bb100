"""Re-scoring fused workspace hits as files: role priors, file evidence, one hit per file."""

from __future__ import annotations

import pytest

from kairox.retrieval import FusedHit, Provenance
from kairox.workspace.file_ranking import DEFAULT_ROLE_WEIGHTS, FileRanking, by_file


def hit(path: str | None, score: float, chunk: int = 0, source: str = "ws", **meta) -> FusedHit:
    metadata = {"path": path, "chunk": chunk, **meta} if path else dict(meta)
    return FusedHit(
        id=f"{path or 'kb'}#{chunk}",
        text=f"text of {path} {chunk}",
        score=score,
        uri=path,
        metadata=metadata,
        sources=(Provenance(source=source, rank=1, score=score),),
    )


def paths(hits: list[FusedHit]) -> list[str | None]:
    return list(dict.fromkeys(h.metadata.get("path") for h in hits))


@pytest.fixture
def auth_hits() -> list[FusedHit]:
    # The test module and the changelog outscore the implementation on words alone.
    return [
        hit("tests/test_auth.py", 1.0),
        hit("CHANGELOG.md", 0.9),
        hit("httpx/_auth.py", 0.7),
        hit("docs/advanced/authentication.md", 0.6),
    ]


def test_by_default_the_implementation_outranks_tests_docs_and_changelogs(auth_hits):
    ranked = FileRanking().rescore("digest authentication response hash", auth_hits)
    assert paths(ranked)[0] == "httpx/_auth.py"
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)


def test_a_query_that_asks_for_tests_gets_the_test(auth_hits):
    ranked = FileRanking().rescore("the tests for digest authentication", auth_hits)
    assert paths(ranked)[0] == "tests/test_auth.py"


def test_a_query_that_asks_for_docs_gets_the_docs_page() -> None:
    hits = [hit("docs/advanced/authentication.md", 0.8), hit("httpx/_auth.py", 0.7)]
    ranked = FileRanking().rescore("documentation on digest authentication", hits)
    assert paths(ranked)[0] == "docs/advanced/authentication.md"


def test_a_named_role_goes_ahead_of_an_implementation_that_matches_better(auth_hits):
    # The implementation matches the words best; the query asks for tests, docs.
    hits = [hit("httpx/_auth.py", 1.0), hit("tests/test_auth.py", 0.8), hit("docs/auth.md", 0.75)]
    assert paths(FileRanking().rescore("the tests for digest authentication", hits))[0] == (
        "tests/test_auth.py"
    )
    assert paths(FileRanking().rescore("docs on digest authentication", hits))[0] == (
        "docs/auth.md"
    )
    # asked_role_weight 1 (and no path bonus): a named role counts as much as the
    # implementation, which then stays first.
    even = FileRanking(asked_role_weight=1.0, asked_path_bonus=0)
    assert paths(even.rescore("the tests for digest authentication", hits))[0] == "httpx/_auth.py"


def test_among_the_files_of_a_named_role_the_one_its_path_names_comes_first() -> None:
    hits = [
        hit("httpx/proxies.py", 1.0),  # not docs: its path gains nothing
        hit("docs/advanced/transports.md", 0.8),  # mentions proxies more often
        hit("docs/advanced/proxies.md", 0.5),
    ]
    ranked = FileRanking().rescore("docs on proxies", hits)
    assert paths(ranked) == [
        "docs/advanced/proxies.md",
        "docs/advanced/transports.md",
        "httpx/proxies.py",
    ]
    # Without the bonus, or for a query naming no role, the path counts for nothing.
    no_bonus = FileRanking(asked_path_bonus=0).rescore("docs on proxies", hits)
    assert paths(no_bonus)[0] == "docs/advanced/transports.md"
    assert paths(FileRanking().rescore("proxies", hits))[0] == "httpx/proxies.py"


def test_role_weights_are_configurable(auth_hits):
    flat = FileRanking(role_weights={})  # every role counts 1.0: the fused order stands
    assert paths(flat.rescore("digest", auth_hits)) == paths(auth_hits)
    weights = {**DEFAULT_ROLE_WEIGHTS, "changelog": 5.0}
    assert paths(FileRanking(role_weights=weights).rescore("digest", auth_hits))[0] == (
        "CHANGELOG.md"
    )


def test_a_file_is_ranked_by_the_evidence_of_all_its_chunks() -> None:
    hits = [
        hit("a.py", 1.0),
        hit("b.py", 0.8, chunk=0),
        hit("b.py", 0.8, chunk=1),
        hit("b.py", 0.7, chunk=2),
    ]
    assert paths(FileRanking(file_evidence=0).rescore("q", hits)) == ["a.py", "b.py"]
    ranked = FileRanking(file_evidence=0.5).rescore("q", hits)
    assert paths(ranked) == ["b.py", "a.py"]
    # The best chunk carries the file's score; the others keep their own, lower ones.
    assert ranked[0].id == "b.py#0" and ranked[0].score > ranked[1].score
    assert {h.id for h in ranked[2:]} == {"b.py#1", "b.py#2"}


def test_knowledge_base_hits_keep_their_place_against_the_best_workspace_file() -> None:
    hits = [hit("docs/rocket.md", 1.0), hit(None, 0.9, source="papers"), hit("x.jsonl", 0.5)]
    ranking = FileRanking(sources=frozenset({"ws"}))
    ranked = ranking.rescore("rocket oxygen", hits)
    assert [h.id for h in ranked] == ["docs/rocket.md#0", "kb#0", "x.jsonl#0"]
    assert ranked[0].score == pytest.approx(1.0)  # the best workspace file keeps its score
    assert ranked[1].score == 0.9


def test_hits_of_other_sources_are_not_weighted() -> None:
    hits = [hit("tests/test_x.py", 1.0, source="kb"), hit("x.py", 0.9)]
    ranked = FileRanking(sources=frozenset({"ws"})).rescore("q", hits)
    assert [h.metadata["path"] for h in ranked] == ["tests/test_x.py", "x.py"]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"role_weights": {"tests": 0.5}}, "unknown roles"),
        ({"role_weights": {"test": -1.0}}, ">= 0"),
        ({"file_evidence": -0.1}, "file_evidence"),
        ({"asked_role_weight": -1.0}, "asked_role_weight"),
        ({"asked_path_bonus": -1.0}, "asked_path_bonus"),
    ],
)
def test_bad_settings_are_refused(settings, problem) -> None:
    with pytest.raises(ValueError, match=problem):
        FileRanking(**settings)


def test_by_file_keeps_each_file_s_best_hit_with_its_lines_and_count() -> None:
    hits = [
        hit("a.py", 0.9, chunk=3, line_start=40, line_end=60),
        hit("b.md", 0.8),
        hit("a.py", 0.7, chunk=1, line_start=10, line_end=20),
        hit(None, 0.6, source="kb"),
    ]
    files = by_file(hits)
    assert [h.id for h in files] == ["a.py#3", "b.md#0", "kb#0"]
    assert files[0].metadata["file_chunks"] == 2
    assert files[0].metadata["file_lines"] == (10, 60)
    assert files[0].metadata["line_start"] == 40  # the best chunk's own lines stay
    assert files[1].metadata["file_chunks"] == 1 and "file_lines" not in files[1].metadata
    assert "file_chunks" not in files[2].metadata


def test_knowledge_base_hits_alone_keep_their_scores_and_order() -> None:
    kb_hits = [hit(None, 0.9, chunk=1), hit(None, 0.9, chunk=0), hit(None, 0.2, chunk=2)]
    ranked = FileRanking().rescore("the tests of auth", kb_hits)
    assert ranked == kb_hits


def test_knowledge_base_hits_out_of_order_are_sorted() -> None:
    kb_hits = [hit(None, 0.2, chunk=2), hit(None, 0.9, chunk=1)]
    ranked = FileRanking().rescore("q", kb_hits)
    assert [h.score for h in ranked] == [0.9, 0.2]
