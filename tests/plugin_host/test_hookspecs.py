"""One test per hook (the datasette habit), and meta-tests that keep it that way."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from click.testing import CliRunner

from kairox import hookimpl
from kairox.cli import build_cli
from kairox.config.schema import KnowledgeBaseConfig
from kairox.plugin_host import hookspecs, registry
from kairox.plugin_host.manager import build_plugin_manager
from kairox.retrieval.stages import TransformedQuery
from kairox.testing import registered_plugin

ROOT = Path(__file__).resolve().parents[2]
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
            register(registry.EmbeddingBackendSpec(name="plugin-embedder", factory=_Backend))

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
            register(registry.WorkspaceRetrieverSpec(name="git-history", factory=lambda ctx: None))

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
            register(
                registry.KnowledgeBaseKind(
                    name="notes", config_model=NotesConfig, factory=lambda *args: None
                )
            )

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
            register(registry.SummarizerSpec(name="first-lines", factory=lambda **_: "summary"))

    with registered_plugin(Plugin(), "summary-plugin", _pm()) as pm:
        assert pm.registry.summarizers["first-lines"].factory() == "summary"
        assert pm.infos["summary-plugin"].hooks == ["kairox_register_summarizers"]


def test_hook_kairox_register_model_backends():
    class Plugin:
        @hookimpl
        def kairox_register_model_backends(self, register):
            register(registry.ModelBackendSpec(name="echo", factory=lambda **_: "model"))

    with registered_plugin(Plugin(), "model-plugin", _pm()) as pm:
        assert pm.registry.model_backends.provider("echo") == "model-plugin"
        assert pm.registry.model_backends["echo"].factory() == "model"


@contextmanager
def _stage_search(workspace: Path, plugin: object, name: str) -> Iterator[Callable[..., dict]]:
    """``search(*args)`` runs ``kairox search ... --json`` with ``plugin`` loaded, over
    four indexed notes, and returns the parsed answer."""
    for number in range(4):
        (workspace / f"note{number}.md").write_text(f"retry uploads note {number}\n")
    with registered_plugin(plugin, name, _pm()) as pm:
        cli = build_cli(pm)
        assert CliRunner().invoke(cli, ["index", "."]).exit_code == 0

        def search(*args: str) -> dict:
            result = CliRunner().invoke(cli, ["search", *args, "--json"])
            assert result.exit_code == 0, result.output
            return json.loads(result.output)

        yield search


def test_hook_kairox_register_rerankers(workspace):
    class Reverse:
        name = "reverse"

        def rerank(self, query, hits):
            return list(reversed(hits))

    class Plugin:
        @hookimpl
        def kairox_register_rerankers(self, register):
            register(registry.RerankerSpec(name="reverse", factory=lambda ctx: Reverse()))

    (workspace / "kairox.toml").write_text('[profiles.default]\nrerank = "reverse"\n')
    with _stage_search(workspace, Plugin(), "rerank-plugin") as search:
        plain = search("retry", "--rerank", "none")
        reranked = search("retry")
        fused = [hit["uri"] for hit in plain["hits"]]
        assert len(fused) >= 2
        assert [hit["uri"] for hit in reranked["hits"]] == fused[::-1]
        assert [hit["fused_rank"] for hit in reranked["hits"]] == list(range(len(fused), 0, -1))
        assert reranked["stages"][0]["source"] == "rerank:reverse"
        assert reranked["stages"][0]["status"] == "ok"


def test_hook_kairox_register_query_transforms(workspace):
    class Exact:
        name = "exact"

        def transform(self, query):
            return TransformedQuery((query.text, "note 2"), note="one more")

    class Plugin:
        @hookimpl
        def kairox_register_query_transforms(self, register):
            register(registry.QueryTransformSpec(name="exact", factory=lambda ctx: Exact()))

    (workspace / "kairox.toml").write_text('[profiles.default]\nquery_transform = "exact"\n')
    with _stage_search(workspace, Plugin(), "transform-plugin") as search:
        found = search("zzz-nothing-matches")
        # only the transform's second text can find anything
        assert found["hits"] and "note2.md" in found["hits"][0]["uri"]
        assert found["stages"][0] == {
            "source": "transform:exact",
            "status": "ok",
            "latency_ms": found["stages"][0]["latency_ms"],
            "hits": 2,
            "error": "one more",
        }


def test_a_profile_naming_an_unknown_stage_is_a_config_error(workspace):
    (workspace / "kairox.toml").write_text('[profiles.default]\nrerank = "mrm"\n')
    result = CliRunner().invoke(build_cli(_pm()), ["config", "check"])
    assert result.exit_code == 2
    assert "no reranker named 'mrm'; did you mean 'mmr'?" in result.output


def test_a_stage_option_is_validated_by_the_stage_schema(workspace):
    (workspace / "kairox.toml").write_text('[profiles.default]\nrerank = "mmr"\nmmr_lambda = 1.5\n')
    result = CliRunner().invoke(build_cli(_pm()), ["config", "check"])
    assert result.exit_code == 2
    assert "mmr_lambda" in result.output and "1" in result.output


def test_hook_kairox_register_converters(tmp_path):
    from kairox.workspace.convert.base import Converted
    from kairox.workspace.convert.converters import Converters

    def shout(data: bytes, filename: str) -> Converted:
        return Converted(text=data.decode().upper(), format="shout")

    class Plugin:
        @hookimpl
        def kairox_register_converters(self, register):
            register(
                registry.ConverterSpec(name="shout", suffixes=(".md", ".shout"), convert=shout)
            )

    with registered_plugin(Plugin(), "shout-plugin", _pm()) as pm:
        table = pm.registry.converters
        assert table.provider("shout") == "shout-plugin"
        assert table.provider("markdown") == "kairox.default_plugins.converters"
        converters = Converters(table[name] for name in table)
        note = tmp_path / "note.md"
        note.write_text("# quiet words")
        # The plugin, loaded after the built-ins, takes .md over from the Markdown converter.
        assert converters.read(note).text == "# QUIET WORDS"
    assert "shout" not in _pm().registry.converters


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


def test_a_stage_that_cannot_be_built_fails_only_its_stage(workspace):
    def broken(ctx):
        raise RuntimeError("model folder missing")

    class Plugin:
        @hookimpl
        def kairox_register_rerankers(self, register):
            register(registry.RerankerSpec(name="broken", factory=broken))

    with _stage_search(workspace, Plugin(), "broken-plugin") as search:
        found = search("retry", "--rerank", "broken")
    assert found["hits"]
    (stage,) = found["stages"]
    assert stage["status"] == "error"
    assert "cannot be built: RuntimeError: model folder missing" in stage["error"]


def test_a_stage_not_named_by_the_profile_may_keep_its_keys_there(workspace):
    (workspace / "kairox.toml").write_text(
        '[profiles.default]\nrerank = "mmr"\nrerank_passage_chars = 300\n'
    )
    result = CliRunner().invoke(build_cli(_pm()), ["config", "check"])
    assert result.exit_code == 0, result.output
    (workspace / "kairox.toml").write_text("[profiles.default]\nrerank_passage_chars = 10\n")
    result = CliRunner().invoke(build_cli(_pm()), ["config", "check"])
    assert result.exit_code == 2 and "rerank_passage_chars" in result.output
