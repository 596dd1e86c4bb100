"""The one workspace index a process's sources share.

The built-in ``workspace`` (by vector) and ``workspace-fts`` (by words) retrievers, the
facade's ``index_workspace`` and ``kb sync`` all read the same index: one SQLite
connection, one schema check and one vector cache per facade, not one per retriever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox.plugin_host.registry import BuildContext
    from kairox.workspace.rag_index import WorkspaceRagIndex
    from kairox.workspace.selection import FileSelection

#: The key of the workspace index among a :class:`~kairox.plugin_host.registry.BuildContext`'s shared
#: resources.
WORKSPACE_INDEX = "kairox.workspace-index"


def workspace_index(ctx: BuildContext) -> WorkspaceRagIndex:
    """The workspace index for ``ctx``: built on first use, then shared (the facade closes it)."""
    return ctx.shared(WORKSPACE_INDEX, lambda: build_workspace_index(ctx))


def build_workspace_index(ctx: BuildContext) -> WorkspaceRagIndex:
    """A new index over ``ctx``'s workspace with the ``[workspace]`` settings (caller closes it)."""
    from kairox.retrieval.vectors import default_sentence_weight
    from kairox.workspace.rag_index import WorkspaceRagIndex

    settings = ctx.workspace
    backend = ctx.embedding_backend(settings.embedding_backend if settings else "hashing")
    options: dict[str, Any] = (
        {
            "chunk_tokens": settings.chunk_tokens,
            "chunk_overlap": settings.chunk_overlap,
            "max_file_bytes": settings.max_file_bytes,
            "vector_pack": settings.vector_pack,
            "vector_format": settings.vector_format,
            "syntax_chunks": settings.syntax_chunks,
        }
        if settings
        else {}
    )
    weight = settings.sentence_weight if settings else None
    # Unset: the embedder's own (hashing makes no sentence vectors).
    options["sentence_weight"] = default_sentence_weight(backend) if weight is None else weight
    stored = settings.vectors if settings else None
    # Unset: the embedder's own (hashing keeps words only).
    options["vectors"] = getattr(backend, "workspace_vectors", True) if stored is None else stored
    options["selection"] = workspace_selection(ctx)
    return WorkspaceRagIndex(
        ctx.state_dir / "kairox.db",
        ctx.workspace_root,
        backend,
        converters=ctx.converters,
        **options,
    )


def workspace_selection(ctx: BuildContext) -> FileSelection:
    """The files ``ctx``'s workspace index takes: ``[workspace] include``/``exclude``,
    never ``$KAIROX_HOME`` or a knowledge base's own files."""
    from kairox.workspace.selection import FileSelection

    settings = ctx.workspace
    return FileSelection.for_workspace(
        ctx.workspace_root,
        include=settings.include if settings else (),
        exclude=settings.exclude if settings else (),
        owned=(ctx.state_dir, *ctx.owned_paths),
    )
