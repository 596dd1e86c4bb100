"""Tests for :mod:`kairox.config`: finding, layering and validating TOML config."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from kairox.config import (
    ConfigError,
    ConfigProblem,
    KairoxConfig,
    KnowledgeBaseConfig,
    ProfileConfig,
    find_workspace_config,
    user_config_path,
)
from kairox.config_loader import load_config
from kairox.registry import (
    EmbeddingBackendSpec,
    KnowledgeBaseKind,
    Registry,
    WorkspaceRetrieverSpec,
)


class SqliteFtsConfig(KnowledgeBaseConfig):
    """A stand-in for the sqlite-fts kind's schema."""

    path: str


class VectorConfig(KnowledgeBaseConfig):
    """A stand-in for a cloud kind whose secret is referenced by env var."""

    index: str
    api_key_env: str


def _no_factory(*args: object) -> None:
    return None


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Private HOME/XDG_CONFIG_HOME so the real user file is never read; returns the cwd."""
    home = tmp_path / "config-test-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    cwd = tmp_path / "config-test-project"
    cwd.mkdir()
    return cwd


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.knowledge_base_kinds.add(
        KnowledgeBaseKind(name="sqlite-fts", config_model=SqliteFtsConfig, factory=_no_factory),
        "test-plugin",
    )
    reg.knowledge_base_kinds.add(
        KnowledgeBaseKind(name="vectors", config_model=VectorConfig, factory=_no_factory),
        "vector-plugin",
    )
    return reg


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def load_ws(cwd: Path, text: str, registry: Registry) -> KairoxConfig:
    write(cwd / "kairox.toml", text)
    return load_config(cwd=cwd, registry=registry)


def problems_of(cwd: Path, text: str, registry: Registry) -> tuple[ConfigError, Path]:
    path = write(cwd / "kairox.toml", text)
    with pytest.raises(ConfigError) as info:
        load_config(cwd=cwd, registry=registry)
    return info.value, path


# -- finding files --------------------------------------------------------------------


def test_user_config_path_follows_xdg(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path.home()
    assert user_config_path() == home / ".config" / "kairox" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(env / "xdg"))
    assert user_config_path() == env / "xdg" / "kairox" / "config.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert user_config_path() == home / ".config" / "kairox" / "config.toml"


def test_find_workspace_config_walks_up(env: Path, registry: Registry) -> None:
    ws_file = write(env / "kairox.toml", '[profiles.fast]\nmodel = "small"\n')
    deep = env / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert find_workspace_config(deep) == ws_file

    config = load_config(cwd=deep, registry=registry)
    assert config.workspace_file == ws_file
    assert config.root == env
    assert config.files == [ws_file]
    assert config.profiles["fast"].model == "small"


def test_no_files_gives_builtin_default_profile(env: Path, registry: Registry) -> None:
    config = load_config(cwd=env, registry=registry)
    assert config.files == []
    assert config.workspace_file is None
    assert config.root == env
    assert config.profiles == {"default": ProfileConfig()}
    assert config.profiles["default"].context_window == 128000
    assert config.knowledge_bases == {}


def test_explicit_config_path_wins_over_discovery(env: Path, registry: Registry) -> None:
    write(env / "kairox.toml", '[profiles.discovered]\nmodel = "x"\n')
    explicit = write(env.parent / "elsewhere" / "custom.toml", '[profiles.explicit]\nmodel = "y"\n')

    config = load_config(cwd=env, config_path=explicit, registry=registry)
    assert config.workspace_file == explicit
    assert config.root == explicit.parent
    assert "explicit" in config.profiles
    assert "discovered" not in config.profiles


def test_missing_explicit_config_path_is_an_error(env: Path, registry: Registry) -> None:
    missing = env / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(cwd=env, config_path=missing, registry=registry)
    [problem] = info.value.problems
    assert problem.file == missing
    assert "not found" in problem.problem
    assert str(missing) in str(info.value)


def test_user_file_is_layered_under_workspace_by_table(env: Path, registry: Registry) -> None:
    user = write(
        user_config_path(),
        """
        [profiles.default]
        model = "user-model"
        context_window = 1000
        headroom = 10

        [profiles.fast]
        model = "small"
        aliases = ["quick"]

        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "user.db"
        weight = 2.5

        [knowledge_bases.notes]
        kind = "sqlite-fts"
        path = "notes.db"

        [workspace]
        embedding_backend = "user-backend"
        """,
    )
    ws = write(
        env / "kairox.toml",
        """
        [profiles.default]
        model = "ws-model"

        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "ws.db"
        """,
    )
    config = load_config(cwd=env, registry=registry)

    assert config.files == [user, ws]
    # [profiles.default] replaced whole: context_window is back to its default.
    assert config.profiles["default"].model == "ws-model"
    assert config.profiles["default"].context_window == 128000
    # Tables only the user file defines are kept.
    assert config.profiles["fast"].aliases == ["quick"]
    assert config.knowledge_bases["notes"].origin == user
    # [knowledge_bases.papers] replaced whole: weight is back to 1.0.
    papers = config.knowledge_bases["papers"]
    assert papers.origin == ws
    assert papers.raw["path"] == "ws.db"
    assert papers.config.weight == 1.0
    assert config.workspace.embedding_backend == "user-backend"


def test_errors_name_the_file_that_defined_the_table(env: Path, registry: Registry) -> None:
    user = write(user_config_path(), "[profiles.fast]\ncontext_window = -1\n")
    ws = write(env / "kairox.toml", "[knowledge_bases.papers]\nkind = 'sqlite-fts'\n")
    with pytest.raises(ConfigError) as info:
        load_config(cwd=env, registry=registry)
    by_table = {p.table: p for p in info.value.problems}
    assert by_table["profiles.fast"].file == user
    assert by_table["profiles.fast"].key == "context_window"
    assert by_table["knowledge_bases.papers"].file == ws
    assert by_table["knowledge_bases.papers"].key == "path"  # required by the kind


def test_workspace_table_overriding_a_broken_user_table_hides_the_error(
    env: Path, registry: Registry
) -> None:
    write(user_config_path(), "[profiles.fast]\ncontext_window = 'big'\n")
    write(env / "kairox.toml", "[profiles.fast]\ncontext_window = 64000\nheadroom = 0\n")
    config = load_config(cwd=env, registry=registry)
    assert config.profiles["fast"].context_window == 64000


def test_file_defining_default_replaces_builtin(env: Path, registry: Registry) -> None:
    config = load_ws(env, '[profiles.default]\nmodel = "mine"\naliases = ["d"]\n', registry)
    assert list(config.profiles) == ["default"]
    assert config.profiles["default"].model == "mine"


# -- the acceptance test: a typo'd key -----------------------------------------------


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


# -- syntax and structure ------------------------------------------------------------


def test_toml_syntax_error_names_file_and_line(env: Path, registry: Registry) -> None:
    err, path = problems_of(env, "[profiles.default]\nmodel = gpt-4o\n", registry)
    [problem] = err.problems
    assert problem.file == path
    assert "line 2" in problem.problem
    assert "invalid TOML" in str(err)


def test_syntax_error_in_one_file_still_reports_the_other(env: Path, registry: Registry) -> None:
    user = write(user_config_path(), "[profiles\n")
    ws = write(env / "kairox.toml", "[bogus]\n")
    with pytest.raises(ConfigError) as info:
        load_config(cwd=env, registry=registry)
    files = [p.file for p in info.value.problems]
    assert user in files
    assert ws in files


def test_unknown_top_level_table_suggests(env: Path, registry: Registry) -> None:
    err, path = problems_of(env, '[knowledge_base.papers]\nkind = "sqlite-fts"\n', registry)
    [problem] = err.problems
    assert problem.file == path
    assert problem.table == "knowledge_base"
    assert "did you mean 'knowledge_bases'?" in problem.problem


def test_non_table_entry_is_reported(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[profiles]\nfast = "gpt-4o"\n', registry)
    [problem] = err.problems
    assert problem.table == "profiles"
    assert problem.key == "fast"
    assert "must be a table" in problem.problem


def test_invalid_ids_are_rejected(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env,
        """
        [profiles."my profile"]
        model = "x"

        [knowledge_bases.""]
        kind = "sqlite-fts"
        path = "a.db"
        """,
        registry,
    )
    messages = [p.problem for p in err.problems]
    assert any("invalid profile name 'my profile'" in m for m in messages)
    assert any("invalid knowledge-base id ''" in m for m in messages)
    assert len(err.problems) == 2


# -- types and values ---------------------------------------------------------------


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


def test_headroom_must_be_below_context_window(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env, "[profiles.default]\ncontext_window = 8000\nheadroom = 8000\n", registry
    )
    [problem] = err.problems
    assert problem.key == "headroom"
    assert "smaller than context_window" in problem.problem
    with pytest.raises(ValueError, match="smaller than context_window"):
        ProfileConfig(context_window=100, headroom=200)


def test_missing_kind(env: Path, registry: Registry) -> None:
    err, path = problems_of(env, '[knowledge_bases.papers]\npath = "p.db"\n', registry)
    [problem] = err.problems
    assert (problem.file, problem.table, problem.key) == (path, "knowledge_bases.papers", "kind")
    assert "missing" in problem.problem
    assert "sqlite-fts" in problem.fix


# -- secrets --------------------------------------------------------------------------


def test_inline_api_key_is_rejected(env: Path, registry: Registry) -> None:
    err, path = problems_of(
        env,
        """
        [knowledge_bases.vec]
        kind = "vectors"
        index = "docs"
        api_key_env = "VEC_KEY"
        api_key = "sk-live-123"
        """,
        registry,
    )
    # Exactly one problem for the key: the secret, not also "unknown key".
    [problem] = err.problems
    assert (problem.file, problem.table, problem.key) == (path, "knowledge_bases.vec", "api_key")
    assert problem.problem == "secrets are not stored in config files"
    assert 'api_key_env = "NAME"' in problem.fix
    assert "sk-live-123" not in str(err)


@pytest.mark.parametrize("key", ["password", "client_secret", "auth_token", "secret_access_key"])
def test_other_secret_names_are_rejected(env: Path, registry: Registry, key: str) -> None:
    err, _ = problems_of(
        env, f'[knowledge_bases.x]\nkind = "tantivy"\n{key} = "hunter2"\n', registry
    )
    assert [p.key for p in err.problems] == [key]


@pytest.mark.parametrize(
    "url",
    [
        "https://user:sk-live-123@api.example.com/v1",
        "http://sk-live-123@127.0.0.1:8080",
        "  https://:sk-live-123@host",
    ],
)
def test_credentials_in_a_url_are_rejected(env: Path, registry: Registry, url: str) -> None:
    err, _ = problems_of(
        env,
        f"""
        [profiles.default]
        base_url = "{url}"

        [knowledge_bases.vec]
        kind = "vectors"
        index = "docs"
        api_key_env = "VEC_KEY"
        host = "{url}"
        """,
        registry,
    )
    assert [(p.table, p.key) for p in err.problems] == [
        ("profiles.default", "base_url"),
        ("knowledge_bases.vec", "host"),
    ]
    assert all("holds credentials" in p.problem for p in err.problems)
    assert "sk-live-123" not in str(err)


def test_a_url_with_an_at_sign_after_the_host_is_fine(env: Path, registry: Registry) -> None:
    config = load_ws(
        env, '[profiles.default]\nbase_url = "https://api.example.com/v1/@me?x=a@b"\n', registry
    )
    assert (
        config.profiles["default"].plugin_keys["base_url"] == "https://api.example.com/v1/@me?x=a@b"
    )


def test_api_key_env_is_accepted(env: Path, registry: Registry) -> None:
    config = load_ws(
        env,
        """
        [knowledge_bases.vec]
        kind = "vectors"
        index = "docs"
        api_key_env = "VEC_KEY"

        [knowledge_bases.pc]
        kind = "pinecone"
        api_key_env = "PINECONE_API_KEY"
        """,
        registry,
    )
    vec = config.knowledge_bases["vec"].config
    assert isinstance(vec, VectorConfig)
    assert vec.api_key_env == "VEC_KEY"
    assert config.knowledge_bases["pc"].raw["api_key_env"] == "PINECONE_API_KEY"


def test_env_reference_must_be_a_variable_name(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env,
        """
        [knowledge_bases.vec]
        kind = "vectors"
        index = "docs"
        api_key_env = "sk-live-123"
        """,
        registry,
    )
    [problem] = err.problems
    assert problem.key == "api_key_env"
    assert "environment variable" in problem.problem
    assert "sk-live-123" not in str(err)


# -- kinds ----------------------------------------------------------------------------


def test_registered_kind_uses_its_config_model(env: Path, registry: Registry) -> None:
    config = load_ws(
        env, '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "p.db"\n', registry
    )
    entry = config.knowledge_bases["papers"]
    assert isinstance(entry.config, SqliteFtsConfig)
    assert entry.config.path == "p.db"
    assert entry.provider == "test-plugin"
    assert entry.available is True
    assert entry.unavailable_reason is None


def test_unregistered_first_party_kind_is_unavailable_not_an_error(
    env: Path, registry: Registry
) -> None:
    config = load_ws(
        env,
        """
        [knowledge_bases.big]
        kind = "tantivy"
        index_dir = "idx"
        timeout_ms = 1500
        """,
        registry,
    )
    entry = config.knowledge_bases["big"]
    assert entry.available is False
    assert entry.provider is None
    assert entry.unavailable_reason is not None
    assert "kairox install kairox-tantivy" in entry.unavailable_reason
    assert entry.config.timeout_ms == 1500  # common keys are still validated
    assert entry.raw["index_dir"] == "idx"  # kind-specific keys kept untouched


def test_unregistered_kind_still_validates_common_keys(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[knowledge_bases.big]\nkind = "tantivy"\nweight = -1\n', registry)
    [problem] = err.problems
    assert problem.key == "weight"


def test_unknown_kind_suggests_a_known_one(env: Path, registry: Registry) -> None:
    config = load_ws(env, '[knowledge_bases.papers]\nkind = "sqlite-ft"\npath = "p"\n', registry)
    entry = config.knowledge_bases["papers"]
    assert entry.available is False
    reason = entry.unavailable_reason or ""
    assert "no installed plugin provides kind 'sqlite-ft'" in reason
    assert "did you mean 'sqlite-fts'?" in reason
    assert "correct `kind`" in reason


def test_kind_specific_key_typo_suggests_kind_field(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env, '[knowledge_bases.papers]\nkind = "sqlite-fts"\npth = "p.db"\n', registry
    )
    by_key = {p.key: p for p in err.problems}
    assert set(by_key) == {"pth", "path"}
    assert "did you mean 'path'?" in by_key["pth"].problem
    assert "missing" in by_key["path"].problem


def test_plugin_schema_that_crashes_names_the_plugin(env: Path) -> None:
    class Broken(KnowledgeBaseConfig):
        @classmethod
        def model_validate(cls, *args: object, **kwargs: object) -> Broken:
            raise RuntimeError("boom")

    reg = Registry()
    reg.knowledge_base_kinds.add(
        KnowledgeBaseKind(name="broken", config_model=Broken, factory=_no_factory), "bad-plugin"
    )
    err, _ = problems_of(env, '[knowledge_bases.x]\nkind = "broken"\n', reg)
    [problem] = err.problems
    assert "'bad-plugin'" in problem.problem
    assert "boom" in problem.problem


# -- profiles and visibility ---------------------------------------------------------

VISIBILITY_TOML = """
[profiles.default]

[profiles.fast]
aliases = ["quick"]

[knowledge_bases.everyone]
kind = "sqlite-fts"
path = "a.db"

[knowledge_bases.fast_by_name]
kind = "sqlite-fts"
path = "b.db"
profile_aliases = ["fast"]

[knowledge_bases.fast_by_alias]
kind = "sqlite-fts"
path = "c.db"
profile_aliases = ["quick"]

[knowledge_bases.default_only]
kind = "sqlite-fts"
path = "d.db"
profile_aliases = ["default"]

[knowledge_bases.off]
kind = "sqlite-fts"
path = "e.db"
enabled = false
"""


def test_visibility_by_name_and_alias(env: Path, registry: Registry) -> None:
    config = load_ws(env, VISIBILITY_TOML, registry)
    ids = lambda profile: [e.id for e in config.visible_knowledge_bases(profile)]  # noqa: E731
    assert ids("default") == ["everyone", "default_only"]
    assert ids("fast") == ["everyone", "fast_by_name", "fast_by_alias"]
    assert ids("quick") == ids("fast")
    assert config.is_visible("fast_by_alias", "fast")
    assert not config.is_visible("fast_by_alias", "default")
    assert not config.is_visible("off", "default")
    with pytest.raises(KeyError):
        config.is_visible("nope", "default")


def test_unknown_profile_in_profile_aliases(env: Path, registry: Registry) -> None:
    err, path = problems_of(
        env,
        """
        [profiles.fast]
        aliases = ["quick"]

        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "p.db"
        profile_aliases = ["quik"]
        """,
        registry,
    )
    [problem] = err.problems
    assert (problem.file, problem.table) == (path, "knowledge_bases.papers")
    assert problem.key is not None and problem.key.startswith("profile_aliases")
    assert "'quik'" in problem.problem
    assert "did you mean 'quick'?" in problem.problem


def test_profile_aliases_may_name_a_user_file_profile(env: Path, registry: Registry) -> None:
    write(user_config_path(), '[profiles.cheap]\naliases = ["budget"]\n')
    config = load_ws(
        env,
        '[knowledge_bases.p]\nkind = "sqlite-fts"\npath = "p"\nprofile_aliases = ["budget"]\n',
        registry,
    )
    assert config.is_visible("p", "cheap")


def test_alias_equal_to_another_profile_name(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[profiles.fast]\n[profiles.smart]\naliases = ["fast"]\n', registry)
    [problem] = err.problems
    assert problem.table == "profiles.smart"
    assert problem.key == "aliases"
    assert "'smart'" in problem.problem
    assert "'fast'" in problem.problem


def test_alias_shared_by_two_profiles(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env,
        """
        [profiles.fast]
        aliases = ["q"]

        [profiles.cheap]
        aliases = ["q"]
        """,
        registry,
    )
    [problem] = err.problems
    assert "'fast'" in problem.problem
    assert "'cheap'" in problem.problem
    assert "'q'" in problem.problem


def test_alias_colliding_with_builtin_default(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[profiles.fast]\naliases = ["default"]\n', registry)
    [problem] = err.problems
    assert "built in" in problem.problem


def test_resolve_profile_by_name_alias_and_unknown(env: Path, registry: Registry) -> None:
    config = load_ws(env, '[profiles.fast]\nmodel = "small"\naliases = ["quick"]\n', registry)
    assert config.resolve_profile("fast") == ("fast", config.profiles["fast"])
    name, profile = config.resolve_profile("quick")
    assert name == "fast"
    assert profile.model == "small"
    with pytest.raises(ConfigError) as info:
        config.resolve_profile("quik")
    assert "did you mean 'quick'?" in str(info.value)


# -- collecting problems --------------------------------------------------------------


def test_all_problems_in_one_file_are_collected(env: Path, registry: Registry) -> None:
    err, path = problems_of(
        env,
        """
        [profiles.default]
        encoding = "nope"

        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "p.db"
        wieght = 2
        """,
        registry,
    )
    assert len(err.problems) == 2
    assert {p.key for p in err.problems} == {"encoding", "wieght"}
    assert all(p.file == path for p in err.problems)
    assert len(str(err).splitlines()) == 2


# -- workspace --------------------------------------------------------------------------


def test_workspace_names_checked_against_registry(env: Path) -> None:
    reg = Registry()
    reg.embedding_backends.add(EmbeddingBackendSpec(name="hashing", factory=_no_factory), "p")
    reg.workspace_retrievers.add(
        WorkspaceRetrieverSpec(name="git-history", factory=_no_factory), "p"
    )
    err, _ = problems_of(
        env,
        '[workspace]\nembedding_backend = "hashin"\ndisabled_retrievers = ["git-histroy"]\n',
        reg,
    )
    text = str(err)
    assert len(err.problems) == 2
    assert "did you mean 'hashing'?" in text
    assert "did you mean 'git-history'?" in text

    config = load_ws(env, '[workspace]\ndisabled_retrievers = ["git-history"]\n', reg)
    assert config.workspace.disabled_retrievers == ["git-history"]


def test_workspace_names_not_checked_with_empty_registry(env: Path) -> None:
    config = load_ws(env, '[workspace]\nembedding_backend = "anything"\n', Registry())
    assert config.workspace.embedding_backend == "anything"


def test_workspace_unknown_key(env: Path, registry: Registry) -> None:
    err, _ = problems_of(env, '[workspace]\nembedding_backnd = "hashing"\n', registry)
    [problem] = err.problems
    assert problem.table == "workspace"
    assert "did you mean 'embedding_backend'?" in problem.problem


def test_workspace_sentence_weight_default_and_range(env: Path, registry: Registry) -> None:
    from kairox.retrieval.vectors import SENTENCE_WEIGHT

    assert load_ws(env, "", registry).workspace.sentence_weight == SENTENCE_WEIGHT
    config = load_ws(env, "[workspace]\nsentence_weight = 0\n", registry)
    assert config.workspace.sentence_weight == 0
    err, _ = problems_of(env, "[workspace]\nsentence_weight = 1.5\n", registry)
    [problem] = err.problems
    assert problem.key == "sentence_weight"
    assert "sentence_weight = 0.5" in problem.fix


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "+inf"])
@pytest.mark.parametrize(
    "table",
    [
        '[knowledge_bases.kb]\nkind = "sqlite-fts"\npath = "kb.db"\nweight',
        "[workspace]\nsentence_weight",
    ],
)
def test_floats_must_be_finite(env: Path, registry: Registry, table: str, value: str) -> None:
    err, _ = problems_of(env, f"{table} = {value}\n", registry)
    [problem] = err.problems
    assert problem.key in ("weight", "sentence_weight")
    assert "finite" in problem.problem + problem.fix


def test_workspace_vector_pack_is_on_by_default_and_a_boolean(
    env: Path, registry: Registry
) -> None:
    assert load_ws(env, "", registry).workspace.vector_pack is True
    assert (
        load_ws(env, "[workspace]\nvector_pack = false\n", registry).workspace.vector_pack is False
    )
    err, _ = problems_of(env, '[workspace]\nvector_pack = "no"\n', registry)
    [problem] = err.problems
    assert problem.key == "vector_pack"
    assert "vector_pack = false" in problem.fix


# -- rendering ----------------------------------------------------------------------------


def test_problem_rendering_leaves_out_missing_parts() -> None:
    full = ConfigProblem(Path("/a/kairox.toml"), "profiles.x", "model", "bad value", "fix it")
    assert str(full) == "/a/kairox.toml: [profiles.x] model: bad value. Fix: fix it"
    bare = ConfigProblem(None, None, None, "bad", "do this")
    assert str(bare) == "bad. Fix: do this"
    err = ConfigError([full, bare])
    assert str(err).splitlines() == [str(full), str(bare)]
    assert pickle.loads(pickle.dumps(err)).problems == [full, bare]


def test_load_config_needs_the_registry_given(env: Path) -> None:
    # No fallback to the process-wide plugin manager: config sits below the plugin host.
    with pytest.raises(TypeError, match="registry"):
        load_config(cwd=env)  # type: ignore[call-arg]


def test_a_folder_named_kairox_toml_is_reported_not_passed_over(
    env: Path, registry: Registry
) -> None:
    write(env / "kairox.toml", '[profiles.default]\nmodel = "outer"\n')
    inner = env / "project"
    (inner / "kairox.toml").mkdir(parents=True)
    with pytest.raises(ConfigError) as info:
        load_config(cwd=inner, registry=registry)
    [problem] = info.value.problems
    assert problem.file == inner / "kairox.toml"
    assert problem.problem == "is a folder, not a config file"


def test_knowledge_base_chunking_keys(env: Path, registry: Registry) -> None:
    config = load_ws(
        env,
        """
        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "a.db"
        chunk_tokens = 128
        chunk_overlap = 16
        """,
        registry,
    )
    settings = config.knowledge_bases["papers"].config
    assert (settings.chunk, settings.chunk_tokens, settings.chunk_overlap) == (True, 128, 16)
    err, _ = problems_of(
        env,
        """
        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "a.db"
        chunk_tokens = 64
        chunk_overlap = 64
        """,
        registry,
    )
    [problem] = err.problems
    assert problem.key == "chunk_overlap"
    assert "must be smaller than chunk_tokens (64)" in problem.problem
