"""``AppFacade``: the one surface the CLI, the TUI and the web app call.

It owns the loaded configuration, the plugin registry, the event store and where state
lives, and exposes the product's verbs (index the workspace, search, ingest a knowledge
base, memories). Surfaces hold no state of their own: two processes with a facade each
on the same ``$KAIROX_HOME`` see each other's writes. The recall and knowledge-base verbs
are mixed in from :mod:`kairox.runtime.facade_recall` and :mod:`kairox.runtime.facade_knowledge_bases`.

Lifecycle: the facade builds each profile's sources the first time they are searched and
reuses them (and their SQLite connections, caches and worker threads) for every search
and turn after that. When a loaded config file changes on disk, the next search reloads
it and builds the sources again (the old ones are closed). :meth:`AppFacade.close` (or
``with AppFacade(...)``) closes every source, the shared workspace index and the database.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypedDict, Unpack

from kairox.retrieval import Query, RetrievalResult
from kairox.retrieval.fusion import DEFAULT_FUSION
from kairox.runtime.facade_knowledge_bases import KnowledgeBaseVerbs
from kairox.runtime.facade_recall import RecallVerbs
from kairox.runtime.search_options import SearchOptions, checked_options
from kairox.support import paths
from kairox.support.closing import ClosedOnExit
from kairox.workspace.file_ranking import by_file

if TYPE_CHECKING:
    from kairox.config.loaded import KairoxConfig
    from kairox.config.schema import ProfileConfig
    from kairox.context.summarizer import Summarizer
    from kairox.memory.approvals import MemoryApprovals
    from kairox.memory.store import MemoryRecord
    from kairox.plugin_host.manager import KairoxPluginManager
    from kairox.plugin_host.registry import Registry
    from kairox.retrieval.composite import CompositeWorkspaceRetriever
    from kairox.retrieval.stages import StagedRetrieval
    from kairox.runtime.session import AppendResult
    from kairox.runtime.sources import SourceFactory
    from kairox.store.events import SqliteEventStore
    from kairox.store.messages import SessionMessage
    from kairox.store.sqlite import Database
    from kairox.support.embed_progress import EmbedProgress
    from kairox.support.models import ModelBackend
    from kairox.workspace.rag_index import IndexStats, WorkspaceRagIndex


class IndexOptions(TypedDict, total=False):
    """The keyword options of :meth:`AppFacade.index_workspace`, as
    :meth:`WorkspaceRagIndex.index` takes them; each may be left out."""

    wait: bool  # wait for another process's run (True) instead of raising IndexBusyError
    progress: Callable[[str, int, int], None] | None  # progress(relpath, done, total)
    embedding: EmbedProgress | None  # counts the chunks and sentences embedded


class AppFacade(RecallVerbs, KnowledgeBaseVerbs, ClosedOnExit):
    """Kairox's verbs over one workspace.

    :param cwd: where to look for ``kairox.toml`` (and the workspace root).
    :param root_given: ``cwd`` was named by the user (``kairox index PATH``,
        ``kairox.open(PATH)``, ``--workspace``): it is the root unless a ``kairox.toml`` at
        or above it says otherwise (:func:`kairox.support.paths.find_workspace_root`).
    :param config_path: an explicit ``kairox.toml`` instead of searching upwards.
    :param config: an already loaded configuration (tests, embedding applications).
    :param pm: the plugin manager; the process-wide one by default.
    :param state_dir: ``$KAIROX_HOME`` by default.
    """

    def __init__(
        self,
        *,
        cwd: Path | None = None,
        config_path: Path | None = None,
        config: KairoxConfig | None = None,
        pm: KairoxPluginManager | None = None,
        state_dir: Path | None = None,
        root_given: bool = False,
    ) -> None:
        self.cwd = (cwd or Path.cwd()).resolve()
        self.root_given = root_given
        self._config_path = config_path
        self._config = config
        self._config_given = config is not None
        self._config_stamp: tuple[Any, ...] = ()
        self._pm = pm
        self.state_dir = state_dir or paths.kairox_home()
        self._sources: SourceFactory | None = None
        self._lock = threading.RLock()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every source built here, the shared workspace index and the database."""
        with self._lock:
            sources, self._sources = self._sources, None
        try:
            if sources is not None:
                await sources.aclose()
        finally:
            self._close_database()

    def close(self) -> None:
        """:meth:`aclose` for synchronous callers."""
        with self._lock:
            sources, self._sources = self._sources, None
        try:
            if sources is not None:
                sources.close()
        finally:
            self._close_database()

    def _close_database(self) -> None:
        for name in ("memory", "events"):
            self.__dict__.pop(name, None)
        database = self.__dict__.pop("_database", None)
        if database is not None:
            database.close()

    # -- set-up ---------------------------------------------------------------------

    @property
    def plugin_manager(self) -> KairoxPluginManager:
        if self._pm is None:
            from kairox.plugin_host.manager import get_plugin_manager

            self._pm = get_plugin_manager()
        return self._pm

    @property
    def registry(self) -> Registry:
        return self.plugin_manager.registry

    @property
    def config(self) -> KairoxConfig:
        if self._config is None:
            self._config = self._load_config()
        return self._config

    def _load_config(self) -> KairoxConfig:
        from kairox.config.loader import load_config

        loaded = load_config(cwd=self.cwd, config_path=self._config_path, registry=self.registry)
        self._config_stamp = _stamp(loaded.files)
        return loaded

    def refresh(self) -> bool:
        """Reload the configuration if a loaded config file changed on disk.

        The sources built from the old configuration are closed and built again on next
        use. A configuration given to the constructor is never reloaded. Returns whether
        anything was reloaded; a broken file raises :class:`~kairox.config.errors.ConfigError`
        and leaves the old configuration in place.
        """
        if self._config_given or self._config is None:
            return False
        if _stamp(self._config.files) == self._config_stamp:
            return False
        reloaded = self._load_config()
        with self._lock:
            self._config, stale, self._sources = reloaded, self._sources, None
        if stale is not None:
            stale.close()
        return True

    @property
    def workspace_root(self) -> Path:
        """The folder of ``kairox.toml``, else the folder given, else the git root, else
        the current folder (:attr:`workspace_root_why` says which)."""
        return self._root.path

    @property
    def workspace_root_why(self) -> str:
        """Why :attr:`workspace_root` is the root, e.g. ``"nearest kairox.toml"``."""
        return self._root.why

    @cached_property
    def _root(self) -> paths.WorkspaceRoot:
        if self.config.workspace_file is not None:
            why = "the --config file's folder" if self._config_path else paths.ROOT_CONFIG
            return paths.WorkspaceRoot(self.config.workspace_file.parent.resolve(), why)
        return paths.find_workspace_root(self.cwd, given=self.root_given)

    @property
    def sources(self) -> SourceFactory:
        """The source factory of the current configuration (built once, reused)."""
        with self._lock:
            if self._sources is None:
                from kairox.runtime.sources import SourceFactory

                self._sources = SourceFactory(
                    self.config,
                    self.registry,
                    workspace_root=self.workspace_root,
                    state_dir=self.state_dir,
                )
            return self._sources

    @cached_property
    def workspace_id(self) -> str:
        """The workspace's id in the state database: its resolved root path."""
        return str(self.workspace_root)

    @property
    def database(self) -> Path:
        """The per-user state database (events, memories, workspace indexes)."""
        return self.state_dir / "kairox.db"

    # -- state: events and memories ---------------------------------------------------

    @cached_property
    def _database(self) -> Database:
        """One connection to the state database, shared by the event and memory stores."""
        from kairox.store.sqlite import Database

        return Database(self.database)

    @cached_property
    def events(self) -> SqliteEventStore:
        """The event log of this process (sessions append to it; the facade owns it)."""
        from kairox.store.events import SqliteEventStore

        return SqliteEventStore(self._database)

    @cached_property
    def memory(self) -> MemoryApprovals:
        """The approval flow over the memory store and the event log, on one connection
        so that every decision and its event commit together."""
        from kairox.memory.approvals import MemoryApprovals
        from kairox.memory.store import SqliteMemoryStore

        settings = self.config.memory
        return MemoryApprovals(
            SqliteMemoryStore(self._database),
            self.events,
            max_proposals_per_turn=settings.max_proposals_per_turn,
            hold_tainted_session=settings.hold_tainted_session,
            limits=settings.limits(),
        )

    def memories(self, *, scope: str | None = None, pending: bool = False) -> list[MemoryRecord]:
        """Memories this workspace sees (user + this workspace), or pending proposals."""
        if pending:
            found = self.memory.pending(self.workspace_id)
            return [r for r in found if scope is None or r.scope == scope]
        store = self.memory.store
        found = []
        if scope in (None, "user"):
            found += store.list(scope="user")
        if scope in (None, "workspace"):
            found += store.list(scope="workspace", workspace_id=self.workspace_id)
        if scope == "session":
            found += [r for r in store.list(scope="session") if r.workspace_id == self.workspace_id]
        return sorted(found, key=lambda r: r.id)

    # -- sessions -------------------------------------------------------------------

    async def append_messages(
        self,
        session_id: str,
        messages: Iterable[SessionMessage | Mapping[str, Any]],
        *,
        profile: str | None = None,
        markers: bool = False,
    ) -> AppendResult:
        """Append ``messages`` to session ``session_id`` as its history (a new id starts one).

        Each message is a :class:`~kairox.store.messages.SessionMessage` or a dict with ``role``,
        ``content`` and optional ``name`` and ``time``. All are checked before any is
        written (:class:`~kairox.store.messages.MessageError` names the first bad one), then
        appended in one transaction; the profile's automatic compaction then runs where
        a live conversation would have run it. ``markers``: strip ``<memory>`` markers
        from assistant messages and propose them (otherwise nothing is proposed).
        Raises :class:`~kairox.runtime.session.SessionBusyError` while another turn is being
        recorded in the session.
        """
        from kairox.runtime.session import open_session

        async with open_session(self, session_id, profile=profile) as live:
            return await live.append(messages, markers=markers)

    # -- models and summarisers -----------------------------------------------------

    def model_backend(
        self, profile: ProfileConfig | str, *, profile_name: str = "", **options: Any
    ) -> ModelBackend:
        """The profile's model backend, built by its spec from the profile's keys.

        ``options`` are given to this one backend on top of the config file's keys
        (``kairox chat --script FILE`` hands the scripted backend its script).
        """
        from kairox.plugin_host.registry import ModelBackendContext
        from kairox.runtime.sources import SourceError, plugin_settings

        if isinstance(profile, str):
            profile_name, profile = self.config.resolve_profile(profile)
        spec = self.registry.model_backends.get(profile.backend)
        if spec is None:
            known = ", ".join(sorted(self.registry.model_backends)) or "none"
            raise SourceError(
                f"no model backend named {profile.backend!r}; installed: {known}. "
                "Set `backend` in the profile."
            )
        settings = plugin_settings(spec.config_model, profile, f"model backend {spec.name!r}")
        return spec.factory(ModelBackendContext(profile_name, profile, settings, dict(options)))

    def summarizer(
        self, name: str, profile: ProfileConfig, backend: ModelBackend | None = None
    ) -> Summarizer:
        """The summariser ``name``, built by its spec; one that asks a model gets
        ``backend`` (default: the profile's)."""
        from kairox.plugin_host.registry import SummarizerContext
        from kairox.runtime.sources import SourceError, plugin_settings

        spec = self.registry.summarizers.get(name)
        if spec is None:
            known = ", ".join(sorted(self.registry.summarizers)) or "none"
            raise SourceError(f"no summarizer named {name!r}; installed: {known}")
        settings = plugin_settings(spec.config_model, profile, f"summarizer {name!r}")
        return spec.factory(
            SummarizerContext(
                profile=profile,
                model_backend=lambda: backend or self.model_backend(profile),
                settings=settings,
            )
        )

    # -- workspace index ------------------------------------------------------------

    def workspace_index(self) -> WorkspaceRagIndex:
        """The workspace index the workspace retrievers search (shared; the facade closes it)."""
        from kairox.workspace.shared import workspace_index

        return workspace_index(self.sources.context())

    def indexed_neighbours(self) -> list[Path]:
        """Indexed workspaces inside this one's root or above it (not the root itself):
        where a search that finds no index here probably meant to look."""
        from kairox.workspace.index_schema import indexed_workspaces

        root = self.workspace_root
        found = []
        for workspace in indexed_workspaces(self.database):
            folder = Path(workspace)
            if folder != root and (folder.is_relative_to(root) or root.is_relative_to(folder)):
                found.append(folder)
        return sorted(found)

    def index_workspace(self, **options: Unpack[IndexOptions]) -> IndexStats:
        """Index (or re-index) the workspace's files incrementally; ``options`` are
        :class:`IndexOptions` (see :meth:`WorkspaceRagIndex.index`)."""
        return self.workspace_index().index(**options)

    # -- search -------------------------------------------------------------------

    def resolve_profile(self, profile: str | None) -> str:
        name, _ = self.config.resolve_profile(profile or "default")
        return name

    def _prepared(
        self,
        text: str,
        *,
        profile: str | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | Any = None,
        fusion: str = DEFAULT_FUSION,
        only: set[str] | None = None,
        rerank: str | None = None,
        query_transform: str | None = None,
        by_file: bool = False,
    ) -> tuple[CompositeWorkspaceRetriever | StagedRetrieval, Query, dict[str, str]]:
        """The searcher, query and groups for one search (the defaults of every option).

        ``by_file`` asks for every candidate (the top ranks do not depend on ``k``), so
        that :meth:`_finished` can keep ``k`` files."""
        self.refresh()
        if by_file:
            k = max(k, self.config.workspace.candidate_depth)
        name = self.resolve_profile(profile)
        composite, groups = self.sources.composite_and_groups(name, fusion=fusion, only=only)
        searcher = self.sources.with_stages(
            composite, name, rerank, query_transform, model_backend=self.model_backend
        )
        # Only None means no filter: any other value ([] too) is parsed, and refused if bad.
        query = Query(text, k=k, filters={} if filters is None else filters)
        return searcher, query, dict(groups)

    async def search(self, text: str, **options: Unpack[SearchOptions]) -> RetrievalResult:
        """Search the workspace and every knowledge base the profile sees, fused.

        ``options`` are :class:`SearchOptions`. The result's ``groups`` say which group
        (``workspace`` or ``knowledge_base``) each source belongs to, as its spec declared.
        Blocking sources run on the event loop's default executor; sources that all answer
        locally are asked in turn, on the loop's thread while that is cheap. ``rerank`` and
        ``query_transform`` name a search stage instead of the profile's (``"none"``: no
        stage); ``result.stages`` reports them.
        """
        composite, query, groups = self._prepared(text, **checked_options(options))
        result = await composite.retrieve(query)
        return self._finished(result, groups, options)

    def search_sync(self, text: str, **options: Unpack[SearchOptions]) -> RetrievalResult:
        """:meth:`search` for synchronous callers; never waits on a source past its deadline.

        A search whose sources all answer locally (sqlite-fts knowledge bases, the
        workspace index) asks them in turn in the calling thread; otherwise the search runs
        on the composite's own worker threads, kept between calls.
        """
        composite, query, groups = self._prepared(text, **checked_options(options))
        return self._finished(composite.retrieve_sync(query), groups, options)

    @staticmethod
    def _finished(
        result: RetrievalResult, groups: dict[str, str], options: SearchOptions
    ) -> RetrievalResult:
        """The result with its groups; with ``by_file``, one hit per file, ``k`` of them
        (:func:`kairox.workspace.file_ranking.by_file`)."""
        if options.get("by_file"):
            hits = by_file(result.hits)[: options.get("k", 10)]
            return dataclasses.replace(result, hits=hits, groups=groups)
        return dataclasses.replace(result, groups=groups)


def _stamp(files: Sequence[Path]) -> tuple[Any, ...]:
    """What changes when one of ``files`` is edited, replaced or removed."""
    stamp: list[Any] = []
    for path in files:
        try:
            info = os.stat(path)
        except OSError:
            stamp.append((str(path), None))
        else:
            stamp.append((str(path), info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(stamp)
