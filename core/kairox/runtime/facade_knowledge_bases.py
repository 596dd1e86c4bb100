"""The knowledge-base verbs of :class:`~kairox.runtime.facade.AppFacade`: ingest documents into a
knowledge base, push the workspace index into a remote one, and find either by its id.

Kept apart from the facade module so that each stays one job; the facade mixes them in and
provides what they use (``sources``, ``config``, ``state_dir``, ``workspace_root``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kairox.retrieval import IngestableSource
from kairox.support import paths

if TYPE_CHECKING:
    from kairox.config.loaded import KairoxConfig, KnowledgeBaseEntry
    from kairox.runtime.ingest import IngestStats
    from kairox.runtime.sources import SourceFactory
    from kairox.runtime.sync import SyncStats
    from kairox.support.embed_progress import EmbedProgress

__all__ = ["KnowledgeBaseVerbs"]

_Source = TypeVar("_Source")


class KnowledgeBaseVerbs:
    """``ingest()`` and ``sync()``, and the knowledge bases they write to, over the facade's
    configuration and sources."""

    sources: SourceFactory
    config: KairoxConfig
    state_dir: Path
    workspace_root: Path

    def ingestable(self, kb_id: str) -> IngestableSource:
        """The knowledge base ``kb_id``, which must accept documents."""
        return self._knowledge_base_that(
            kb_id,
            IngestableSource,
            "is filled outside Kairox; `kairox kb ingest` writes only to local kinds such as "
            "sqlite-fts and tantivy",
        )

    def _knowledge_base_that(self, kb_id: str, kind: type[_Source], cannot: str) -> _Source:
        """The knowledge base ``kb_id`` as a ``kind``; else a SourceError saying it ``cannot``."""
        from kairox.runtime.sources import SourceError

        entry = self._knowledge_base_entry(kb_id)
        source = self.sources.knowledge_base(entry)
        if not isinstance(source, kind):
            raise SourceError(f"knowledge base {kb_id!r} (kind {entry.kind!r}) {cannot}")
        return source

    def _knowledge_base_entry(self, kb_id: str) -> KnowledgeBaseEntry:
        from kairox.config.errors import ConfigError, ConfigProblem

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
        chunk: bool | None = None,
        planned: Callable[[int], None] | None = None,
        stage: Callable[[str], None] | None = None,
        checked: Callable[[int], None] | None = None,
    ) -> IngestStats:
        """Fill knowledge base ``kb_id`` from files, folders and JSONL, incrementally.

        Documents are chunked as the knowledge base's ``chunk``, ``chunk_tokens`` and
        ``chunk_overlap`` say; ``chunk=False`` stores them whole this once.
        ``checked(n)``: documents checked so far (the first pass); ``planned(n)``: the
        documents to go through, once known; ``progress(n)``: documents gone through;
        ``stage(what)``: a step before the first write ("" when it is over).
        """
        from kairox.runtime.ingest import ingest

        entry = self._knowledge_base_entry(kb_id)
        settings = entry.config
        # A full disk names where the knowledge base keeps its files (else $KAIROX_HOME).
        stored = entry.own_paths()
        with paths.disk_full_errors(stored[0].parent if stored else self.state_dir):
            return ingest(
                self.ingestable(kb_id),
                inputs,
                root=self.workspace_root,
                prune=prune,
                progress=progress,
                planned=planned,
                stage=stage,
                checked=checked,
                max_bytes=self.config.workspace.max_file_bytes,
                chunk=settings.chunk if chunk is None else chunk,
                chunk_tokens=settings.chunk_tokens,
                chunk_overlap=settings.chunk_overlap,
                converters=self.sources.converters(),
            )

    def sync(
        self,
        kb_id: str,
        *,
        full: bool = False,
        progress: Callable[[int, int], None] | None = None,
        embedding: EmbedProgress | None = None,
    ) -> SyncStats:
        """Push the workspace index into remote knowledge base ``kb_id`` (see kairox.runtime.sync)."""
        from kairox.retrieval import VectorSyncTarget
        from kairox.runtime.sources import SourceError
        from kairox.runtime.sync import sync_workspace
        from kairox.workspace.rag_index import NOT_INDEXED, WorkspaceRagIndex
        from kairox.workspace.shared import workspace_selection

        target = self._knowledge_base_that(
            kb_id,
            VectorSyncTarget,
            "cannot receive the workspace index; `kairox kb sync` pushes to vector stores such "
            "as pinecone and weaviate",
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
            syntax_chunks=settings.syntax_chunks,
            selection=workspace_selection(self.sources.context()),
        )
        try:
            if not index.is_indexed():
                raise SourceError(NOT_INDEXED)
            return sync_workspace(
                index, target, kb_id=kb_id, full=full, progress=progress, embedding=embedding
            )
        finally:
            index.close()
