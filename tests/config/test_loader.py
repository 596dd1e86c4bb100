"""Tests for :mod:`kairox.config.loader`: validating every table against the registry and the
secret rules, and collecting every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox.config.errors import ConfigError
from kairox.config.loader import load_config
from kairox.config.schema import KnowledgeBaseConfig, user_config_path
from kairox.plugin_host.registry import (
    EmbeddingBackendSpec,
    KnowledgeBaseKind,
    Registry,
    WorkspaceRetrieverSpec,
)

from .conftest import (
    SqliteFtsConfig,
    VectorConfig,
    load_ws,
    no_factory,
    problems_of,
    write,
)


def test_missing_explicit_config_path_is_an_error(env: Path, registry: Registry) -> None:
    missing = env / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(cwd=env, config_path=missing, registry=registry)
    [problem] = info.value.problems
    assert problem.file == missing
    assert "not found" in problem.problem
    assert str(missing) in str(info.value)


def test_load_config_needs_the_registry_given(env: Path) -> None:
    # No fallback to the process-wide plugin manager: config sits below the plugin host.
    with pytest.raises(TypeError, match="registry"):
        load_config(cwd=env)  # type: ignore[call-arg]


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


def test_unknown_kind_suggests_a_known_one(env: Path, registry: Registry) -> None:
    config = load_ws(env, '[knowledge_bases.papers]\nkind = "sqlite-ft"\npath = "p"\n', registry)
    entry = config.knowledge_bases["papers"]
    assert entry.available is False
    reason = entry.unavailable_reason or ""
    assert "no installed plugin provides kind 'sqlite-ft'" in reason
    assert "did you mean 'sqlite-fts'?" in reason
    assert "correct `kind`" in reason


def test_plugin_schema_that_crashes_names_the_plugin(env: Path) -> None:
    class Broken(KnowledgeBaseConfig):
        @classmethod
        def model_validate(cls, *args: object, **kwargs: object) -> Broken:
            raise RuntimeError("boom")

    reg = Registry()
    reg.knowledge_base_kinds.add(
        KnowledgeBaseKind(name="broken", config_model=Broken, factory=no_factory), "bad-plugin"
    )
    err, _ = problems_of(env, '[knowledge_bases.x]\nkind = "broken"\n', reg)
    [problem] = err.problems
    assert "'bad-plugin'" in problem.problem
    assert "boom" in problem.problem


def test_profile_aliases_may_name_a_user_file_profile(env: Path, registry: Registry) -> None:
    write(user_config_path(), '[profiles.cheap]\naliases = ["budget"]\n')
    config = load_ws(
        env,
        '[knowledge_bases.p]\nkind = "sqlite-fts"\npath = "p"\nprofile_aliases = ["budget"]\n',
        registry,
    )
    assert config.is_visible("p", "cheap")


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


def test_workspace_names_checked_against_registry(env: Path) -> None:
    reg = Registry()
    reg.embedding_backends.add(EmbeddingBackendSpec(name="hashing", factory=no_factory), "p")
    reg.workspace_retrievers.add(
        WorkspaceRetrieverSpec(name="git-history", factory=no_factory), "p"
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
