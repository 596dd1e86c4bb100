"""Tests for :mod:`kairox.config_problems`: pydantic's errors as problems with a fix."""

from __future__ import annotations

from pathlib import Path

from kairox.registry import Registry

from .conftest import problems_of


def test_profile_alias_typo_names_file_table_key_and_fix(env: Path, registry: Registry) -> None:
    err, path = problems_of(
        env,
        """
        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "papers.db"
        profile_alias = ["default"]
        """,
        registry,
    )
    [problem] = err.problems
    assert problem.file == path
    assert problem.table == "knowledge_bases.papers"
    assert problem.key == "profile_alias"
    text = str(err)
    assert str(path) in text
    assert "knowledge_bases.papers" in text
    assert "profile_alias" in text
    assert "did you mean 'profile_aliases'?" in text
    assert "Fix:" in text


def test_wrong_type_is_translated(env: Path, registry: Registry) -> None:
    err, path = problems_of(
        env,
        """
        [profiles.default]
        context_window = "big"
        """,
        registry,
    )
    [problem] = err.problems
    assert (problem.file, problem.table, problem.key) == (
        path,
        "profiles.default",
        "context_window",
    )
    assert "integer" in problem.problem
    assert "whole number" in problem.fix


def test_wrong_literal_lists_allowed_values(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[profiles.default]\nencoding = "p50k_base"\n', registry)
    [problem] = err.problems
    assert problem.key == "encoding"
    assert "o200k_base" in problem.fix
    assert "cl100k_base" in problem.fix


def test_timeout_fix_talks_milliseconds(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env,
        """
        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "p.db"
        timeout_ms = 1.5
        """,
        registry,
    )
    [problem] = err.problems
    assert problem.key == "timeout_ms"
    assert "whole number of milliseconds" in problem.fix


def test_kind_specific_key_typo_suggests_kind_field(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env, '[knowledge_bases.papers]\nkind = "sqlite-fts"\npth = "p.db"\n', registry
    )
    by_key = {p.key: p for p in err.problems}
    assert set(by_key) == {"pth", "path"}
    assert "did you mean 'path'?" in by_key["pth"].problem
    assert "missing" in by_key["path"].problem


def test_workspace_unknown_key(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[workspace]\nembedding_backnd = "hashing"\n', registry)
    [problem] = err.problems
    assert problem.table == "workspace"
    assert "did you mean 'embedding_backend'?" in problem.problem
