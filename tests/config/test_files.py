"""Tests for :mod:`kairox.config.files`: reading the TOML files and layering their tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox.config.errors import ConfigError
from kairox.config.loader import load_config
from kairox.config.schema import user_config_path
from kairox.plugin_host.registry import Registry

from .conftest import load_ws, write


def test_explicit_config_path_wins_over_discovery(env: Path, registry: Registry) -> None:
    write(env / "kairox.toml", '[profiles.discovered]\nmodel = "x"\n')
    explicit = write(env.parent / "elsewhere" / "custom.toml", '[profiles.explicit]\nmodel = "y"\n')

    config = load_config(cwd=env, config_path=explicit, registry=registry)
    assert config.workspace_file == explicit
    assert config.root == explicit.parent
    assert "explicit" in config.profiles
    assert "discovered" not in config.profiles


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


def test_syntax_error_in_one_file_still_reports_the_other(env: Path, registry: Registry) -> None:
    user = write(user_config_path(), "[profiles\n")
    ws = write(env / "kairox.toml", "[bogus]\n")
    with pytest.raises(ConfigError) as info:
        load_config(cwd=env, registry=registry)
    files = [p.file for p in info.value.problems]
    assert user in files
    assert ws in files


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
