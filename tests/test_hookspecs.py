"""One test per hook (the datasette habit), and meta-tests that keep it that way."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import click
from click.testing import CliRunner

from kairox import hookimpl, hookspecs
from kairox.cli import build_cli
from kairox.config import KnowledgeBaseConfig
from kairox.plugins import build_plugin_manager
from kairox.registry import (
    EmbeddingBackendSpec,
    KnowledgeBaseKind,
    ModelBackendSpec,
    SummarizerSpec,
    WorkspaceRetrieverSpec,
)
from kairox.testing import registered_plugin

ROOT = Path(__file__).resolve().parents[1]
HOOK_NAMES = sorted(
    name
    for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
    if name.startswith("kairox_")
)


def test_every_hook_has_its_own_test():
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    missing = [name for name in HOOK_NAMES if f"def test_hook_{name}(" not in sources]
    assert not missing, f"hooks without a test_hook_<name> test: {missing}"


def test_every_hook_is_documented_with_semantics_and_params():
    for name in HOOK_NAMES:
        spec = getattr(hookspecs, name)
        doc = inspect.getdoc(spec) or ""
        assert "Called" in doc, f"{name}: say when and how it is called"
        for param in inspect.signature(spec).parameters:
            assert f":param {param}:" in doc, f"{name}: document :param {param}:"
        assert "versionadded" in doc, f"{name}: add a versionadded note"


def test_every_hook_is_in_the_plugin_guide():
    guide = (ROOT / "docs" / "plugins.md").read_text()
    missing = [name for name in HOOK_NAMES if not re.search(rf"\b{name}\b", guide)]
    assert not missing, f"docs/plugins.md does not describe: {missing}"


def _pm():
    return build_plugin_manager(entry_points=False)


class _Backend:
    name = "plugin-embedder"
    dim = 3

    def embed(self, texts):
        import numpy as np

        return np.ones((len(texts), 3), dtype="float32")


def test_hook_kairox_register_embedding_backends(workspace):
    class Plugin:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="plugin-embedder", factory=_Backend))

    (workspace / "kairox.toml").write_text('[workspace]\nembedding_backend = "plugin-embedder"\n')
    with registered_plugin(Plugin(), "embedder-plugin", _pm()) as pm:
        spec = pm.registry.embedding_backends["plugin-embedder"]
        assert spec.factory().embed(["a", "b"]).shape == (2, 3)
        result = CliRunner().invoke(build_cli(pm), ["config", "check", "--json"])
        assert result.exit_code == 0, result.output
    assert "plugin-embedder" not in pm.registry.embedding_backends


def test_hook_kairox_register_workspace_retrievers():
    class Plugin:
        @hookimpl
        def kairox_register_workspace_retrievers(self, register):
            register(WorkspaceRetrieverSpec(name="git-history", factory=lambda ctx: None))

    with registered_plugin(Plugin(), "git-plugin", _pm()) as pm:
        assert pm.registry.workspace_retrievers.provider("git-history") == "git-plugin"
        result = CliRunner().invoke(build_cli(pm), ["config", "check", "--json"])
        report = json.loads(result.output)
        row = next(s for s in report["sources"] if s["id"] == "git-history")
        assert row["type"] == "workspace" and row["provider"] == "git-plugin"
        assert {"profile": "default", "source": "git-history", "visible": True} in report["matrix"]


def test_hook_kairox_register_knowledge_base_kinds(workspace):
    class NotesConfig(KnowledgeBaseConfig):
        folder: str

    class Plugin:
        @hookimpl
        def kairox_register_knowledge_base_kinds(self, register):
            register(KnowledgeBaseKind(name="notes", config_model=NotesConfig, factory=print))

    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.mine]\nkind = "notes"\nfolder = "notes/"\n'
    )
    with registered_plugin(Plugin(), "notes-plugin", _pm()) as pm:
        result = CliRunner().invoke(build_cli(pm), ["config", "check", "--json"])
        assert result.exit_code == 0, result.output
        row = next(s for s in json.loads(result.output)["sources"] if s["id"] == "mine")
        assert (row["kind"], row["provider"], row["installed"]) == ("notes", "notes-plugin", True)
        # the kind's own schema validates its keys
        (workspace / "kairox.toml").write_text(
            '[knowledge_bases.mine]\nkind = "notes"\nfoldr = "notes/"\n'
        )
        result = CliRunner().invoke(build_cli(pm), ["config", "check"])
        assert result.exit_code == 2
        assert "foldr" in result.output and "folder" in result.output


def test_hook_kairox_register_summarizers():
    class Plugin:
        @hookimpl
        def kairox_register_summarizers(self, register):
            register(SummarizerSpec(name="first-lines", factory=lambda **_: "summary"))

    with registered_plugin(Plugin(), "summary-plugin", _pm()) as pm:
        assert pm.registry.summarizers["first-lines"].factory() == "summary"
        assert pm.infos["summary-plugin"].hooks == ["kairox_register_summarizers"]


def test_hook_kairox_register_model_backends():
    class Plugin:
        @hookimpl
        def kairox_register_model_backends(self, register):
            register(ModelBackendSpec(name="echo", factory=lambda **_: "model"))

    with registered_plugin(Plugin(), "model-plugin", _pm()) as pm:
        assert pm.registry.model_backends.provider("echo") == "model-plugin"
        assert pm.registry.model_backends["echo"].factory() == "model"


def test_hook_kairox_register_commands():
    class Plugin:
        @hookimpl
        def kairox_register_commands(self, cli):
            @cli.command()
            @click.argument("who")
            def hello(who):
                """Say hello."""
                click.echo(f"hello {who}")

    with registered_plugin(Plugin(), "hello-plugin", _pm()) as pm:
        result = CliRunner().invoke(build_cli(pm), ["hello", "kairox"])
        assert result.exit_code == 0 and result.output == "hello kairox\n"
    assert "hello" not in build_cli(pm).commands


def test_commands_hook_that_raises_or_clashes_leaves_the_cli_working(capsys):
    class Raises:
        @hookimpl
        def kairox_register_commands(self, cli):
            @cli.command()
            def half():
                pass

            raise RuntimeError("no commands today")

    class Clashes:
        @hookimpl
        def kairox_register_commands(self, cli):
            @cli.command()
            def plugins():
                click.echo("hijacked")

    pm = _pm()
    with registered_plugin(Raises(), "raises", pm), registered_plugin(Clashes(), "clashes", pm):
        cli = build_cli(pm)
        warnings = capsys.readouterr().err
        assert "raises" in warnings and "no commands today" in warnings
        assert "clashes" in warnings and "'plugins' (already from kairox)" in warnings
        assert "half" not in cli.commands
        result = CliRunner().invoke(cli, ["plugins", "--all", "--json"])
        assert result.exit_code == 0
        assert "hijacked" not in result.stdout
        assert json.loads(result.stdout)
