"""Tests for :mod:`kairox.config.problems`: pydantic's errors as problems with a fix; and, in
one table, every mistake that makes exactly one problem, whichever module finds it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from kairox.plugin_host.registry import Registry

from .conftest import problems_of


@dataclass(frozen=True)
class OneProblem:
    """A config text that raises exactly one problem, and what that problem must say.

    Only the parts given are checked: the problem's ``table``, its ``key`` (or how the key
    starts, ``key_prefix``), words in its ``problem`` (or the whole of it, ``problem_is``)
    and ``fix``, words in the whole error's ``message``, that it names the workspace file
    (``in_file``), and words the message must never show (``hidden``).
    """

    text: str
    table: str | None = None
    key: str | None = None
    key_prefix: str | None = None
    problem: tuple[str, ...] = ()
    problem_is: str | None = None
    fix: tuple[str, ...] = ()
    message: tuple[str, ...] = ()
    in_file: bool = False
    hidden: tuple[str, ...] = ()

    def check(self, cwd: Path, registry: Registry) -> None:
        err, path = problems_of(cwd, self.text, registry)
        [problem] = err.problems
        if self.in_file:
            assert problem.file == path
            assert str(path) in str(err)
        if self.table is not None:
            assert problem.table == self.table
        if self.key is not None:
            assert problem.key == self.key
        if self.key_prefix is not None:
            assert problem.key is not None and problem.key.startswith(self.key_prefix)
        for words in self.problem:
            assert words in problem.problem
        if self.problem_is is not None:
            assert problem.problem == self.problem_is
        for words in self.fix:
            assert words in problem.fix
        for words in self.message:
            assert words in str(err)
        for secret in self.hidden:
            assert secret not in str(err)


# Every mistake that makes exactly one problem, by the module that finds it.
ONE_PROBLEM = {
    # kairox.config.files: the file is not TOML, or not shaped as tables.
    "toml_syntax_error_names_file_and_line": OneProblem(
        "[profiles.default]\nmodel = gpt-4o\n",
        in_file=True,
        problem=("line 2",),
        message=("invalid TOML",),
    ),
    "unknown_top_level_table_suggests": OneProblem(
        '[knowledge_base.papers]\nkind = "sqlite-fts"\n',
        in_file=True,
        table="knowledge_base",
        problem=("did you mean 'knowledge_bases'?",),
    ),
    "non_table_entry_is_reported": OneProblem(
        '[profiles]\nfast = "gpt-4o"\n',
        table="profiles",
        key="fast",
        problem=("must be a table",),
    ),
    # kairox.config.problems: a value or key the schema refuses.
    "wrong_type_is_translated": OneProblem(
        '[profiles.default]\ncontext_window = "big"\n',
        in_file=True,
        table="profiles.default",
        key="context_window",
        problem=("integer",),
        fix=("whole number",),
    ),
    "wrong_literal_lists_allowed_values": OneProblem(
        '[profiles.default]\nencoding = "p50k_base"\n',
        key="encoding",
        fix=("o200k_base", "cl100k_base"),
    ),
    "timeout_fix_talks_milliseconds": OneProblem(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "p.db"\ntimeout_ms = 1.5\n',
        key="timeout_ms",
        fix=("whole number of milliseconds",),
    ),
    "profile_alias_typo_names_file_table_key_and_fix": OneProblem(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "papers.db"\n'
        'profile_alias = ["default"]\n',
        in_file=True,
        table="knowledge_bases.papers",
        key="profile_alias",
        message=(
            "knowledge_bases.papers",
            "profile_alias",
            "did you mean 'profile_aliases'?",
            "Fix:",
        ),
    ),
    "chunk_overlap_must_be_below_chunk_tokens": OneProblem(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "a.db"\n'
        "chunk_tokens = 64\nchunk_overlap = 64\n",
        key="chunk_overlap",
        problem=("must be smaller than chunk_tokens (64)",),
    ),
    "workspace_unknown_key": OneProblem(
        '[workspace]\nembedding_backnd = "hashing"\n',
        table="workspace",
        problem=("did you mean 'embedding_backend'?",),
    ),
    # kairox.config.loader: what the registry, the secret rules and the aliases refuse.
    "missing_kind": OneProblem(
        '[knowledge_bases.papers]\npath = "p.db"\n',
        in_file=True,
        table="knowledge_bases.papers",
        key="kind",
        problem=("missing",),
        fix=("sqlite-fts",),
    ),
    "env_reference_must_be_a_variable_name": OneProblem(
        '[knowledge_bases.vec]\nkind = "vectors"\nindex = "docs"\napi_key_env = "sk-live-123"\n',
        key="api_key_env",
        problem=("environment variable",),
        hidden=("sk-live-123",),
    ),
    "inline_api_key_is_a_secret_not_an_unknown_key": OneProblem(
        '[knowledge_bases.vec]\nkind = "vectors"\nindex = "docs"\napi_key_env = "VEC_KEY"\n'
        'api_key = "sk-live-123"\n',
        in_file=True,
        table="knowledge_bases.vec",
        key="api_key",
        problem_is="secrets are not stored in config files",
        fix=('api_key_env = "NAME"',),
        hidden=("sk-live-123",),
    ),
    "unregistered_kind_still_validates_common_keys": OneProblem(
        '[knowledge_bases.big]\nkind = "tantivy"\nweight = -1\n', key="weight"
    ),
    "unknown_profile_in_profile_aliases": OneProblem(
        '[profiles.fast]\naliases = ["quick"]\n\n'
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "p.db"\nprofile_aliases = ["quik"]\n',
        in_file=True,
        table="knowledge_bases.papers",
        key_prefix="profile_aliases",
        problem=("'quik'", "did you mean 'quick'?"),
    ),
    "alias_equal_to_another_profile_name": OneProblem(
        '[profiles.fast]\n[profiles.smart]\naliases = ["fast"]\n',
        table="profiles.smart",
        key="aliases",
        problem=("'smart'", "'fast'"),
    ),
    "alias_shared_by_two_profiles": OneProblem(
        '[profiles.fast]\naliases = ["q"]\n\n[profiles.cheap]\naliases = ["q"]\n',
        problem=("'fast'", "'cheap'", "'q'"),
    ),
    "alias_colliding_with_builtin_default": OneProblem(
        '[profiles.fast]\naliases = ["default"]\n', problem=("built in",)
    ),
}


@pytest.mark.parametrize("case", list(ONE_PROBLEM.values()), ids=list(ONE_PROBLEM))
def test_a_mistake_is_one_problem_naming_what_to_fix(
    env: Path, registry: Registry, case: OneProblem
) -> None:
    case.check(env, registry)


def test_kind_specific_key_typo_suggests_kind_field(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env, '[knowledge_bases.papers]\nkind = "sqlite-fts"\npth = "p.db"\n', registry
    )
    by_key = {p.key: p for p in err.problems}
    assert set(by_key) == {"pth", "path"}
    assert "did you mean 'path'?" in by_key["pth"].problem
    assert "missing" in by_key["path"].problem
