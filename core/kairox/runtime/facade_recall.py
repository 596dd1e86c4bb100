"""The recall verbs of :class:`~kairox.runtime.facade.AppFacade`: the message archive, searched.

Kept apart from the facade module so that each stays one job; the facade mixes them in and
provides what they use (``sources``, ``config``, ``database``, ``workspace_id``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kairox.config.loaded import KairoxConfig
    from kairox.context.assembly import RecalledTurn
    from kairox.recall import MessageArchive
    from kairox.runtime.sources import SourceFactory

__all__ = ["RecallVerbs"]


class RecallVerbs:
    """``archive()`` and ``recall()``, over the facade's sources and state database."""

    sources: SourceFactory
    config: KairoxConfig
    database: Path
    workspace_id: str

    def archive(self) -> MessageArchive:
        """The recall index of this workspace's messages, in the workspace embedder's
        vectors (shared; the facade closes it)."""
        from kairox.recall import MessageArchive

        sources = self.sources
        embedder = self.config.workspace.embedding_backend
        return sources.shared(
            f"recall-archive:{embedder}",
            lambda: MessageArchive(
                self.database, self.workspace_id, sources.embedding_backend(embedder)
            ),
        )

    def recall(
        self,
        text: str,
        *,
        session_id: str,
        scope: str | None = None,
        k: int = 10,
        encoding: str | None = None,
    ) -> list[RecalledTurn]:
        """The ``k`` archived messages most relevant to ``text`` that ``session_id`` may
        recall (``scope``: ``own``, ``workspace``, ``none``; the ``[recall]`` table's by
        default), best first, after indexing what the event store holds and the index lacks;
        with ``encoding``, each message's prompt line comes counted in it."""
        from kairox.recall import recall_for

        return recall_for(
            self.archive(),
            text,
            session_id=session_id,
            scope=scope or self.config.recall.sessions,
            k=k,
            encoding=encoding,
        )
