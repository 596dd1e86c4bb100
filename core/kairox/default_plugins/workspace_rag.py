"""The built-in workspace retrievers over ``WorkspaceRagIndex``: by vector and by words.

Both are registered through ``kairox_register_workspace_retrievers`` like any plugin's,
so every profile gets them unless ``[workspace] disabled_retrievers`` names them. Fused
together they make the workspace search hybrid by default.
"""

from __future__ import annotations

from kairox import hookimpl
from kairox.registry import BuildContext, WorkspaceRetrieverSpec


def build_index(ctx: BuildContext):  # -> WorkspaceRagIndex, imported lazily
    from kairox.workspace.rag_index import WorkspaceRagIndex

    settings = ctx.workspace
    backend = ctx.embedding_backend(settings.embedding_backend if settings else "hashing")
    options = (
        {
            "chunk_tokens": settings.chunk_tokens,
            "chunk_overlap": settings.chunk_overlap,
            "max_file_bytes": settings.max_file_bytes,
            "sentence_weight": settings.sentence_weight,
            "vector_pack": settings.vector_pack,
        }
        if settings
        else {}
    )
    return WorkspaceRagIndex(ctx.state_dir / "kairox.db", ctx.workspace_root, backend, **options)


def dense_retriever(ctx: BuildContext):
    from kairox.workspace.rag_index import WorkspaceDenseRetriever

    return WorkspaceDenseRetriever(build_index(ctx), name="workspace")


def lexical_retriever(ctx: BuildContext):
    from kairox.workspace.rag_index import WorkspaceLexicalRetriever

    return WorkspaceLexicalRetriever(build_index(ctx), name="workspace-fts")


@hookimpl
def kairox_register_workspace_retrievers(register):
    register(
        WorkspaceRetrieverSpec(
            name="workspace",
            factory=dense_retriever,
            description="Workspace chunks by embedding similarity ([workspace] embedding_backend).",
        )
    )
    register(
        WorkspaceRetrieverSpec(
            name="workspace-fts",
            factory=lexical_retriever,
            description="Workspace chunks and paths by words (FTS5 BM25).",
        )
    )
