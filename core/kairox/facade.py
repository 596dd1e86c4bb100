"""``AppFacade``: the one surface the CLI, the TUI and the web app call.

It owns the loaded configuration, the plugin registry and where state lives, and
exposes the product's verbs (index the workspace, search, ingest a knowledge base).
Surfaces hold no state of their own: two processes with a facade each on the same
``$KAIROX_HOME`` see each other's writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox import paths
from kairox.retrieval import IngestableSource, Query, RetrievalResult
from kairox.retrieval.fusion import DEFAULT_FUSION

if TYPE_CHECKING:
    from kairox.config import KairoxConfig, KnowledgeBaseEntry, ProfileConfig
    from kairox.context.summarizer import Summarizer
    from kairox.ingest import IngestStats
    from kairox.memory.approvals import MemoryApprovals
    from kairox.memory.store import MemoryRecord
    from kairox.models import ModelBackend
    from kairox.plugins import KairoxPluginManager
    from kairox.registry import Registry
    from kairox.retrieval.composite import CompositeWorkspaceRetriever
    from kairox.sources import SourceFactory
    from kairox.sync import SyncStats
    from kairox.workspace.rag_index import IndexStats, WorkspaceRagIndex


class AppFacade:
    """Kairox's verbs over one workspace.

    :param cwd: where to look for ``kairox.toml`` (and the workspace root).
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
    ) -> None:
        self.cwd = (cwd or Path.cwd()).resolve()
        self._config_path = config_path
        self._config = config
        self._pm = pm
        self.state_dir = state_dir or paths.kairox_home()

    # -- set-up ---------------------------------------------------------------------

    @property
    def plugin_manager(self) -> KairoxPluginManager:
        if self._pm is None:
            from kairox.plugins import get_plugin_manager

            self._pm = get_plugin_manager()
        return self._pm

    @property
    def registry(self) -> Registry:
        return self.plugin_manager.registry

    @property
    def config(self) -> KairoxConfig:
        if self._config is None:
            from kairox.config import load_config

            self._config = load_config(
                cwd=self.cwd, config_path=self._config_path, registry=self.registry
            )
        return self._config

    @cached_property
    def workspace_root(self) -> Path:
        """The folder of ``kairox.toml``, else the git root, else the current folder."""
        if self.config.workspace_file is not None:
            return self.config.workspace_file.parent.resolve()
        return paths.workspace_root(self.cwd)

    @cached_property
    def sources(self) -> SourceFactory:
        from kairox.sources import SourceFactory

        return SourceFactory(
            self.config,
            self.registry,
            workspace_root=self.workspace_root,
            state_dir=self.state_dir,
        )

    @cached_property
    def workspace_id(self) -> str:
        """The workspace's id in the state database: its resolved root path."""
        return str(self.workspace_root)

    @property
    def database(self) -> Path:
        """The per-user state database (events, memories, workspace indexes)."""
        return self.state_dir / "kairox.db"

    # -- memory ----------------------------------------------------------------------

    @cached_property
    def memory(self) -> MemoryApprovals:
        """The approval flow over the memory store and the event log (shared database)."""
        from kairox.events import SqliteEventStore
        from kairox.memory.approvals import MemoryApprovals
        from kairox.memory.store import SqliteMemoryStore

        return MemoryApprovals(
            SqliteMemoryStore(self.database),
            SqliteEventStore(self.database),
            max_proposals_per_turn=self.config.memory.max_proposals_per_turn,
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

    # -- models and summarisers -----------------------------------------------------

    def model_backend(self, profile: ProfileConfig, **options: Any) -> ModelBackend:
        """The profile's model backend (``backend``, ``base_url``, ``api_key_env``)."""
        from kairox.sources import SourceError

        spec = self.registry.model_backends.get(profile.backend)
        if spec is None:
            known = ", ".join(sorted(self.registry.model_backends)) or "none"
            raise SourceError(
                f"no model backend named {profile.backend!r}; installed: {known}. "
                "Set `backend` in the profile."
            )
        if profile.backend == "openai-compatible":
            options.setdefault("base_url", profile.base_url)
            options.setdefault("api_key_env", profile.api_key_env)
        return spec.factory(**options)

    def summarizer(
        self, name: str, profile: ProfileConfig, backend: ModelBackend | None = None
    ) -> Summarizer:
        """The summariser ``name``; the ``llm`` one talks through the profile's model."""
        from kairox.sources import SourceError

        spec = self.registry.summarizers.get(name)
        if spec is None:
            known = ", ".join(sorted(self.registry.summarizers)) or "none"
            raise SourceError(f"no summarizer named {name!r}; installed: {known}")
        if name == "llm":
            return spec.factory(backend=backend or self.model_backend(profile), model=profile.model)
        return spec.factory()

    # -- workspace index ------------------------------------------------------------

    def workspace_index(self) -> WorkspaceRagIndex:
        from kairox.default_plugins.workspace_rag import build_index

        return build_index(self.sources.context())

    def index_workspace(
        self, *, wait: bool = True, progress: Callable[[str, int, int], None] | None = None
    ) -> IndexStats:
        """Index (or re-index) the workspace's files incrementally."""
        index = self.workspace_index()
        try:
            return index.index(wait=wait, progress=progress)
        finally:
            index.close()

    # -- search -------------------------------------------------------------------

    def resolve_profile(self, profile: str | None) -> str:
        name, _ = self.config.resolve_profile(profile or "default")
        return name

    def _prepared(
        self,
        text: str,
        profile: str | None,
        k: int,
        filters: Mapping[str, Any] | None,
        fusion: str,
        only: set[str] | None,
    ) -> tuple[CompositeWorkspaceRetriever, Query]:
        composite = self.sources.composite(self.resolve_profile(profile), fusion=fusion, only=only)
        return composite, Query(text, k=k, filters=dict(filters or {}))

    async def search(
        self,
        text: str,
        *,
        profile: str | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        fusion: str = DEFAULT_FUSION,
        only: set[str] | None = None,
    ) -> RetrievalResult:
        """Search the workspace and every knowledge base the profile sees, fused."""
        composite, query = self._prepared(text, profile, k, filters, fusion, only)
        return await composite.retrieve(query)

    def search_sync(
        self,
        text: str,
        *,
        profile: str | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        fusion: str = DEFAULT_FUSION,
        only: set[str] | None = None,
    ) -> RetrievalResult:
        """:meth:`search` for synchronous callers; never waits on a source past its deadline."""
        composite, query = self._prepared(text, profile, k, filters, fusion, only)
        return composite.retrieve_sync(query)

    # -- knowledge bases ----------------------------------------------------------

    def ingestable(self, kb_id: str) -> IngestableSource:
        """The knowledge base ``kb_id``, which must accept documents."""
        from kairox.sources import SourceError

        entry = self._knowledge_base_entry(kb_id)
        source = self.sources.knowledge_base(entry)
        if not isinstance(source, IngestableSource):
            raise SourceError(
                f"knowledge base {kb_id!r} (kind {entry.kind!r}) is filled outside Kairox; "
                "`kairox kb ingest` writes only to local kinds such as sqlite-fts and tantivy"
            )
        return source

    def _knowledge_base_entry(self, kb_id: str) -> KnowledgeBaseEntry:
        from kairox.config import ConfigError, ConfigProblem

        entry = self.config.knowledge_bases.get(kb_id)
        if entry is None:
            known = ", ".join(self.config.knowledge_bases) or "none configured"
            raise ConfigError(
                [
                    ConfigProblem(
                        file=self.config.workspace_file,
                        table=f"knowledge_bases.{kb_id}",
                        key=None,
                        problem=f"no knowledge base {kb_id!r} is configured (known: {known})",
                        fix=f'add [knowledge_bases.{kb_id}] with kind = "sqlite-fts" and a path',
                    )
                ]
            )
        return entry

    def ingest(
        self,
        kb_id: str,
        inputs: Sequence[Path],
        *,
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> IngestStats:
        """Fill knowledge base ``kb_id`` from files, folders and JSONL, incrementally."""
        from kairox.ingest import ingest

        return ingest(
            self.ingestable(kb_id),
            inputs,
            root=self.workspace_root,
            prune=prune,
            progress=progress,
        )

    def sync(
        self,
        kb_id: str,
        *,
        full: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> SyncStats:
        """Push the workspace index into remote knowledge base ``kb_id`` (see kairox.sync)."""
        from kairox.retrieval import VectorSyncTarget
        from kairox.sources import SourceError
        from kairox.sync import sync_workspace
        from kairox.workspace.rag_index import NOT_INDEXED, WorkspaceRagIndex

        entry = self._knowledge_base_entry(kb_id)
        target = self.sources.knowledge_base(entry)
        if not isinstance(target, VectorSyncTarget):
            raise SourceError(
                f"knowledge base {kb_id!r} (kind {entry.kind!r}) cannot receive the workspace "
                "index; `kairox kb sync` pushes to vector stores such as pinecone and weaviate"
            )
        settings = self.config.workspace
        index = WorkspaceRagIndex(
            self.state_dir / "kairox.db",
            self.workspace_root,
            self.sources.embedding_backend(target.embedding_backend),
            chunk_tokens=settings.chunk_tokens,
            chunk_overlap=settings.chunk_overlap,
            max_file_bytes=settings.max_file_bytes,
            # The target stores and searches chunk vectors only: no sentences to embed.
            sentence_weight=0,
        )
        try:
            if not index.is_indexed():
                raise SourceError(NOT_INDEXED)
            return sync_workspace(index, target, kb_id=kb_id, full=full, progress=progress)
        finally:
            index.close()
