"""Fixtures for the configuration tests: private config folders, a registry with two kinds."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kairox.config.errors import ConfigError
from kairox.config.loaded import KairoxConfig
from kairox.config.loader import load_config
from kairox.config.schema import KnowledgeBaseConfig
from kairox.plugin_host.registry import KnowledgeBaseKind, Registry


class SqliteFtsConfig(KnowledgeBaseConfig):
    """A stand-in for the sqlite-fts kind's schema."""

    path: str


class VectorConfig(KnowledgeBaseConfig):
    """A stand-in for a cloud kind whose secret is referenced by env var."""

    index: str
    api_key_env: str


def no_factory(*args: object) -> None:
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
        KnowledgeBaseKind(name="sqlite-fts", config_model=SqliteFtsConfig, factory=no_factory),
        "test-plugin",
    )
    reg.knowledge_base_kinds.add(
        KnowledgeBaseKind(name="vectors", config_model=VectorConfig, factory=no_factory),
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
