"""The facade as a runtime: sources built once and reused, closed on exit, rebuilt on a config
change; groups from specs; model backends configured through their own schema."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner
from pydantic import Field, StrictStr

from kairox import hookimpl
from kairox.cli import build_cli
from kairox.config.schema import PluginSettings
from kairox.plugin_host.registry import (
    ModelBackendSpec,
    SourceGroup,
    WorkspaceRetrieverSpec,
)
from kairox.retrieval import Hit, Provenance, Query, ScoreKind
from kairox.runtime.facade import AppFacade
from kairox.runtime.session import open_session
from kairox.testing import registered_plugin, run
from tests.conftest import SCRIPTED_DEFAULT_PROFILE

DOCS = {
    "notes/release.md": "Releases are cut with make release from the main branch.\n",
    "notes/freeze.md": "We never deploy on Fridays; the freeze starts Thursday night.\n",
}
CONFIG = (
    SCRIPTED_DEFAULT_PROFILE
    + """
[workspace]
vectors = true  # both workspace retrievers (hashing's default keeps words only)

[knowledge_bases.notes]
kind = "sqlite-fts"
path = "notes-kb.db"
"""
)


@pytest.fixture
def pm():
    from kairox.plugin_host.manager import build_plugin_manager

    return build_plugin_manager(entry_points=False)


@pytest.fixture
def unindexed(workspace, pm):
    """A workspace with two files, not indexed, and a small sqlite-fts knowledge base."""
    (workspace / "kairox.toml").write_text(CONFIG)
    for relative, text in DOCS.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (workspace / "kb.jsonl").write_text(
        '{"id": "r1", "text": "The release train leaves every Tuesday."}\n'
    )
    with AppFacade(cwd=workspace, pm=pm) as facade:
        facade.ingest("notes", [workspace / "kb.jsonl"])
    return workspace


@pytest.fixture
def indexed(unindexed, pm):
    """The same workspace, indexed."""
    with AppFacade(cwd=unindexed, pm=pm) as facade:
        facade.index_workspace()
    return unindexed


class _Opened:
    """Counts SQLite connections opened (stdlib and apsw), passing each to the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real_sqlite, real_apsw = sqlite3.connect, apsw.Connection

        def sqlite_connect(*args, **kwargs):
            self.count += 1
            return real_sqlite(*args, **kwargs)

        def apsw_connection(*args, **kwargs):
            self.count += 1
            return real_apsw(*args, **kwargs)

        monkeypatch.setattr(sqlite3, "connect", sqlite_connect)
        monkeypatch.setattr(apsw, "Connection", apsw_connection)


def open_files_under(folder: Path) -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            target = fd.readlink()
        except OSError:
            continue
        if str(target).startswith(str(folder)):
            count += 1
    return count


# -- lifecycle ---------------------------------------------------------------------------


def test_warm_searches_open_no_sqlite_connection(indexed, pm, monkeypatch):
    opened = _Opened(monkeypatch)
    with AppFacade(cwd=indexed, pm=pm) as facade:
        first = facade.search_sync("release", k=5)
        assert {r.source: r.status for r in first.reports} == {
            "workspace": "ok",
            "workspace-fts": "ok",
            "notes": "ok",
        }
        run(facade.search("warm the async path too", k=5))
        warm = opened.count
        assert warm > 0  # the spy sees the connections the first searches opened
        files = open_files_under(facade.state_dir)
        for number in range(100):
            query = f"release freeze {number}"
            if number % 2:
                facade.search_sync(query, k=5)
            else:
                run(facade.search(query, k=5))
        assert opened.count == warm
        assert open_files_under(facade.state_dir) == files


def test_the_two_workspace_retrievers_share_one_index_and_one_composite(indexed, pm):
    with AppFacade(cwd=indexed, pm=pm) as facade:
        first = facade.sources.composite("default")
        second = facade.sources.composite("default")
        assert first is second
        by_name = {source.name: source for source in first.sources}
        assert by_name["workspace"].index is by_name["workspace-fts"].index
        assert facade.workspace_index() is by_name["workspace"].index


class ClosingSource:
    """A workspace retriever whose close() is sync or async; it records the calls."""

    score_kind = ScoreKind.BM25
    closed: list[str]

    def __init__(self, name: str, asynchronous: bool) -> None:
        self.name = name
        self.asynchronous = asynchronous
        self.closed = []

    async def retrieve(self, query: Query) -> list[Hit]:
        return [Hit(f"{self.name}-1", f"{self.name} knows about {query.text}", 1.0, self.name)]

    def close(self):
        if not self.asynchronous:
            self.closed.append("sync")
            return None

        async def later() -> None:
            await asyncio.sleep(0)
            self.closed.append("async")

        return later()


class ClosingPlugin:
    def __init__(self) -> None:
        self.built: list[ClosingSource] = []

    def _factory(self, name: str, asynchronous: bool):
        def build(ctx):
            source = ClosingSource(name, asynchronous)
            self.built.append(source)
            return source

        return build

    @hookimpl
    def kairox_register_workspace_retrievers(self, register):
        register(WorkspaceRetrieverSpec("sync-closer", self._factory("sync-closer", False)))
        register(WorkspaceRetrieverSpec("async-closer", self._factory("async-closer", True)))


async def _close_from_a_coroutine(facade: AppFacade) -> None:
    facade.close()  # the sync close inside a running loop (a notebook, an async app)


@pytest.mark.parametrize("how", ["sync", "async", "sync inside a loop"])
def test_the_facade_closes_every_source_once_on_exit(workspace, pm, how):
    plugin = ClosingPlugin()
    with registered_plugin(plugin, "closers", pm):
        facade = AppFacade(cwd=workspace, pm=pm)
        for _ in range(3):
            facade.search_sync("anything", k=3)
        assert len(plugin.built) == 2  # built once each, whatever the number of searches
        if how == "sync":
            facade.close()
        elif how == "async":
            run(facade.aclose())
        else:
            run(_close_from_a_coroutine(facade))
    assert sorted(c for source in plugin.built for c in source.closed) == ["async", "sync"]


def test_a_changed_config_file_rebuilds_the_sources(workspace, pm):
    plugin = ClosingPlugin()
    config = workspace / "kairox.toml"
    config.write_text('[workspace]\ndisabled_retrievers = ["async-closer"]\n')
    with registered_plugin(plugin, "closers", pm), AppFacade(cwd=workspace, pm=pm) as facade:
        before = facade.search_sync("x", k=3)
        assert "async-closer" not in {r.source for r in before.reports}
        assert [s.name for s in plugin.built] == ["sync-closer"]
        config.write_text('[workspace]\ndisabled_retrievers = ["sync-closer"]\n')
        after = facade.search_sync("x", k=3)
        assert {r.source for r in after.reports} >= {"async-closer"}
        assert "sync-closer" not in {r.source for r in after.reports}
        # The old source was closed when the configuration changed, not at exit.
        assert plugin.built[0].closed == ["sync"]


# -- groups -------------------------------------------------------------------------------


class GitHistory:
    """A third-party workspace retriever: the core must file its hits under the workspace."""

    name = "git-history"
    score_kind = ScoreKind.BM25

    async def retrieve(self, query: Query) -> list[Hit]:
        return [
            Hit(
                "c0ffee",
                "commit c0ffee: moved the Friday deploy freeze to Thursday night",
                5.0,
                self.name,
                uri="git:c0ffee",
            )
        ]


class GitPlugin:
    @hookimpl
    def kairox_register_workspace_retrievers(self, register):
        register(WorkspaceRetrieverSpec("git-history", lambda ctx: GitHistory()))


def test_a_third_party_workspace_retriever_is_grouped_as_workspace(indexed, pm):
    with registered_plugin(GitPlugin(), "git", pm), AppFacade(cwd=indexed, pm=pm) as facade:
        assert pm.registry.workspace_retrievers["git-history"].group is SourceGroup.WORKSPACE
        result = facade.search_sync("deploy freeze", k=5)
        assert result.groups["git-history"] == "workspace"
        assert result.groups["notes"] == "knowledge_base"

        async def turn():
            from kairox.default_plugins.scripted_model import ScriptedModel

            async with open_session(facade, backend=ScriptedModel(["noted"])) as session:
                return await session.turn("when is the deploy freeze?")

        assembly = run(turn()).assembly
    trace = assembly.trace()
    git = [hit for hit in trace["hits"] if hit["source"] == "git-history"]
    assert git and git[0]["group"] == "workspace"
    assert git[0]["section"] == "workspace_retrieval" and git[0]["included"]
    system = assembly.messages[0].content
    workspace_section = system.split("## Context from the workspace\n", 1)[1]
    assert "commit c0ffee" in workspace_section.split("\n## ", 1)[0]
    assert "## Context from git-history" not in system
    # The trace's ranks are fusion's order, across sources.
    assert [hit["rank"] for hit in trace["hits"]] == list(range(1, len(trace["hits"]) + 1))
    assert "workspace:git-history" in assembly.tainted_by


# -- model backends configured through their own schema --------------------------------------


class EchoSettings(PluginSettings):
    endpoint: StrictStr
    temperature: float = Field(default=0.7, ge=0, le=2, allow_inf_nan=False)


class EchoBackend:
    name = "echo"

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    async def stream(self, messages, *, model, max_tokens=None):
        yield f"{self.ctx.settings.endpoint} at {self.ctx.settings.temperature}"


class EchoPlugin:
    @hookimpl
    def kairox_register_model_backends(self, register):
        register(ModelBackendSpec("echo", EchoBackend, config_model=EchoSettings))


def test_a_replacement_model_backend_receives_its_own_keys(workspace, pm):
    (workspace / "kairox.toml").write_text(
        '[profiles.default]\nbackend = "echo"\nendpoint = "http://127.0.0.1:9/v1"\n'
        "temperature = 0.2\n"
    )
    with registered_plugin(EchoPlugin(), "echo-plugin", pm), AppFacade(cwd=workspace, pm=pm) as f:
        backend = f.model_backend("default")
        assert isinstance(backend, EchoBackend)
        assert backend.ctx.profile_name == "default"
        assert backend.ctx.settings == EchoSettings(
            endpoint="http://127.0.0.1:9/v1", temperature=0.2
        )

        async def turn():
            async with open_session(f) as session:
                return await session.turn("hello")

        assert run(turn()).text == "http://127.0.0.1:9/v1 at 0.2"


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ('endpoint = "http://x"\ntemperature = "hot"\n', "temperature", "valid number"),
        ('endpoint = "http://x"\ntemprature = 0.1\n', "temprature", "did you mean 'temperature'"),
        ("temperature = 0.1\n", "endpoint", "required key is missing"),
        ('endpoint = "http://x"\nbase_url = "http://y"\n', "base_url", "unknown key"),
    ],
)
def test_config_check_validates_a_backend_s_own_keys(workspace, pm, table, key, problem):
    config = workspace / "kairox.toml"
    config.write_text(f'[profiles.default]\nbackend = "echo"\n{table}')
    with registered_plugin(EchoPlugin(), "echo-plugin", pm):
        result = CliRunner().invoke(build_cli(pm), ["config", "check"])
    assert result.exit_code == 2, result.output
    assert str(config) in result.output
    assert "profiles.default" in result.output
    assert key in result.output and problem in result.output
    assert "fix:" in result.output.lower() or "→" in result.output


def test_the_openai_backend_keys_are_its_own_and_reach_it(workspace, pm):
    (workspace / "kairox.toml").write_text(
        '[profiles.local]\nbase_url = "http://127.0.0.1:11434/v1"\napi_key_env = "LOCAL_KEY"\n'
    )
    with AppFacade(cwd=workspace, pm=pm) as facade:
        backend = facade.model_backend("local")
        assert (backend.base_url, backend.api_key_env) == ("http://127.0.0.1:11434/v1", "LOCAL_KEY")
        assert "base_url" not in type(facade.config.profiles["local"]).model_fields


def test_a_search_of_one_knowledge_base_keeps_its_own_ranking(indexed, pm):
    (indexed / "more.jsonl").write_text(
        "".join(
            f'{{"id": "m{n}", "text": "{" ".join(["release"] * n)} notes on item {n} of many"}}\n'
            for n in range(1, 7)
        )
    )
    with AppFacade(cwd=indexed, pm=pm) as facade:
        facade.ingest("notes", [indexed / "more.jsonl"])
        result = facade.search_sync("release", k=3, only={"notes"})
        (source,) = facade.sources.composite("default", only={"notes"}).sources
        own = run(source.retrieve(Query("release", k=100)))
    assert [hit.id for hit in result.hits] == [hit.id for hit in own[:3]]
    assert [hit.sources for hit in result.hits] == [
        (Provenance("notes", rank, hit.score),) for rank, hit in enumerate(own[:3], start=1)
    ]
    assert [
        (report.source, report.status.value, report.hit_count) for report in result.reports
    ] == [("notes", "ok", len(own))]


def _threads_started(call):
    """``call()``'s result, and the names of the threads it left running."""
    before = {thread.ident for thread in threading.enumerate()}
    result = call()
    return result, [t.name for t in threading.enumerate() if t.ident not in before]


def test_a_search_of_one_local_source_starts_no_thread(unindexed, pm):
    with AppFacade(cwd=unindexed, pm=pm) as facade:
        result, started = _threads_started(lambda: facade.search_sync("release train", k=3))
        composite = facade.sources.composite("default")
    assert started == []
    assert composite.answers_here()
    assert [hit.id for hit in result.hits] == ["r1"]
    assert {r.source: r.status.value for r in result.reports} == {
        "notes": "ok",
        "workspace": "skipped",
        "workspace-fts": "skipped",
    }


def _outputs(result) -> tuple[list, list]:
    hits = [(hit.id, hit.score, hit.sources) for hit in result.hits]
    reports = [(r.source, r.status.value, r.hit_count, r.error) for r in result.reports]
    return hits, reports


def test_local_sources_are_asked_in_turn_and_rank_as_when_asked_concurrently(indexed, pm):
    with AppFacade(cwd=indexed, pm=pm) as facade:
        in_turn, started = _threads_started(lambda: facade.search_sync("release freeze", k=5))
        composite = facade.sources.composite("default")
        assert composite.answers_here()
        on_loop = run(facade.search("release freeze", k=5))
        composite.local_path = False  # every source in a worker thread of its own
        concurrent = facade.search_sync("release freeze", k=5)
    assert started == []
    assert [source.name for source in composite.sources] == ["workspace", "workspace-fts", "notes"]
    expected = _outputs(concurrent)
    assert expected[0] and {report[1] for report in expected[1]} == {"ok"}
    assert _outputs(in_turn) == expected == _outputs(on_loop)
    assert in_turn.groups == concurrent.groups


def test_a_profile_is_planned_once_until_a_source_becomes_available(unindexed, pm):
    with AppFacade(cwd=unindexed, pm=pm) as facade:
        first = facade.sources.plan("default")
        assert facade.sources.plan("default") is first
        assert [source.name for source in first.sources] == ["notes"]

        facade.index_workspace()  # the workspace retrievers can answer now
        renewed = facade.sources.plan("default")
        result = facade.search_sync("release", k=5)
    assert renewed is not first
    assert [source.name for source in renewed.sources] == ["workspace", "workspace-fts", "notes"]
    assert {r.source: r.status.value for r in result.reports} == {
        "workspace": "ok",
        "workspace-fts": "ok",
        "notes": "ok",
    }
