"""The history benchmark's queries: which commits give one, their text and answers,
the reason each other commit is skipped, and the time split."""

from __future__ import annotations

import pytest

from kairox.bench import BenchError
from kairox.bench.history import (
    DEPENDENCIES,
    DUPLICATE,
    FORMATTING,
    GONE,
    MERGE,
    NO_SOURCE,
    OLDER,
    RELEASE,
    REVERT,
    TOO_MANY,
    Commit,
    clean_subject,
    export_head,
    extract,
    skip_reason,
)
from kairox.bench.history_paths import is_source, role_of

EXPECTED = {
    "Add parser for config values": ("src/pkg/parser.py",),
    "teach the parser about lists": ("src/pkg/parser.py",),
    "share helpers between core and util": ("src/pkg/core.py", "src/pkg/util.py"),
    "rename the tokenizer to lexer": ("src/pkg/lexer.py",),
    # Renamed later: the answer is the file's path at HEAD.
    "handle empty input in tokenizer": ("src/pkg/lexer.py",),
}


def test_queries_are_the_small_source_commits_with_answers_at_head(history_repo):
    history = extract(history_repo.root)
    found = {q.text: q.answers for q in history.queries}
    assert found == EXPECTED


def test_every_other_commit_is_skipped_with_its_reason(history_repo):
    history = extract(history_repo.root)
    reasons = {subject: reason for _, subject, reason in history.skipped_commits}
    assert reasons == {
        "document the parser": NO_SOURCE,
        "cover the lexer": NO_SOURCE,
        "Merge branch 'feature'": MERGE,
        "remove legacy helper": GONE,
        "add legacy helper": GONE,
        "build(deps): bump requests from 2.31 to 2.32": DEPENDENCIES,
        "Run black over the code": FORMATTING,
        'Revert "handle empty input"': REVERT,
        "Bump version to 1.2.0": RELEASE,
        # The newest commit keeps a repeated text.
        "add parser for config values (#12)": DUPLICATE,
        "Initial layout": TOO_MANY,
    }
    assert history.skipped == {
        NO_SOURCE: 2,
        GONE: 2,
        MERGE: 1,
        DEPENDENCIES: 1,
        FORMATTING: 1,
        REVERT: 1,
        RELEASE: 1,
        DUPLICATE: 1,
        TOO_MANY: 1,
    }


def test_a_bare_clone_gives_the_same_queries(history_repo, tmp_path):
    bare = tmp_path / "bare.git"
    history_repo.git("clone", "-q", "--bare", str(history_repo.root), str(bare))
    assert [q.text for q in extract(bare).queries] == [
        q.text for q in extract(history_repo.root).queries
    ]


def test_time_split_puts_the_newest_queries_in_test(history_repo):
    history = extract(history_repo.root, test_share=0.4)
    ordered = sorted(history.queries, key=lambda q: q.time)
    assert [q.split for q in ordered] == ["train", "train", "train", "test", "test"]
    assert {q.text for q in history.split("test")} == {
        "teach the parser about lists",
        "Add parser for config values",
    }
    assert len(history.split("all")) == 5
    with pytest.raises(BenchError, match="unknown split"):
        history.split("dev")


def test_limit_keeps_the_newest_queries_and_counts_the_rest(history_repo):
    history = extract(history_repo.root, limit=2)
    assert {q.text for q in history.queries} == {
        "Add parser for config values",
        "teach the parser about lists",
    }
    assert history.skipped[OLDER] == 3


def test_with_body_adds_the_body(history_repo):
    history_repo.commit(
        "make the lexer faster", {"src/pkg/lexer.py": "x = 1\n"}, body="Cache the table."
    )
    plain = {q.text for q in extract(history_repo.root).queries}
    with_body = {q.text for q in extract(history_repo.root, with_body=True).queries}
    assert "make the lexer faster" in plain
    assert "make the lexer faster\n\nCache the table." in with_body


@pytest.mark.parametrize(
    ("subject", "cleaned"),
    [
        ("fix: handle empty input (#1234)", "handle empty input"),
        ("feat(router)!: allow QUERY requests (#7366)", "allow QUERY requests"),
        ("[core] [docs] explain retries.", "explain retries"),
        ("Fix crash on empty path (fixes #12)", "Fix crash on empty path"),
        ("support proxies [skip ci]", "support proxies"),
        ("kairox bench: progress lines", "kairox bench: progress lines"),
    ],
)
def test_clean_subject(subject, cleaned):
    assert clean_subject(subject) == cleaned


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("src/flask/app.py", "implementation"),
        ("context.go", "implementation"),
        ("lib/router/index.js", "implementation"),
        ("tests/test_app.py", "test"),
        ("context_test.go", "test"),
        ("src/app.spec.ts", "test"),
        ("src/test/java/FooTest.java", "test"),
        ("conftest.py", "config"),
        ("docs/conf.py", "docs"),
        ("examples/auth/index.js", "docs"),
        (".github/workflows/ci.py", "config"),
        ("vendor/lib/x.go", "vendored"),
        ("api/v1_pb2.py", "vendored"),
        ("CHANGELOG.md", "other"),
        ("pyproject.toml", "other"),
    ],
)
def test_roles_of_paths(path, role):
    assert role_of(path) == role
    assert is_source(path) == (role == "implementation")


def test_export_head_writes_the_committed_tree_only(history_repo, tmp_path):
    (history_repo.root / "src/pkg/core.py").write_text("uncommitted\n")
    tree = export_head(history_repo.root, tmp_path / "tree")
    assert (tree / "src/pkg/lexer.py").exists()
    assert not (tree / "src/pkg/tokenizer.py").exists()
    assert "uncommitted" not in (tree / "src/pkg/core.py").read_text()
    with pytest.raises(BenchError, match="not empty"):
        export_head(history_repo.root, tree)


def test_a_folder_without_history_is_refused_clearly(tmp_path):
    with pytest.raises(BenchError, match="not a git repository"):
        extract(tmp_path)


@pytest.mark.parametrize(
    ("subject", "skipped"),
    [
        ("Run black over the code", True),
        ("Format code", True),
        ("fix formatting", True),
        ("style: wrap long lines", True),
        ("fix clippy warnings", True),
        ("Fix typo in docstring", True),
        ("fix formatting of help text", False),  # output formatting: a real change
        ("Support RFC 3339 format in the time filter", False),
        ("add --format option", False),
    ],
)
def test_formatting_commits(subject, skipped):
    commit = Commit("0" * 40, ("1" * 40,), 0, "Ada <ada@example.com>", subject, "", ())
    assert (skip_reason(commit) == FORMATTING) is skipped


def test_a_file_moved_out_of_the_sources_since_is_no_answer(history_repo):
    (history_repo.root / "examples").mkdir()
    history_repo.git("mv", "src/pkg/parser.py", "examples/parser.py")
    history_repo.commit("move the parser into the examples")
    found = {q.text: q.answers for q in extract(history_repo.root).queries}
    assert "Add parser for config values" not in found  # its only answer is an example now
    assert found["handle empty input in tokenizer"] == ("src/pkg/lexer.py",)
