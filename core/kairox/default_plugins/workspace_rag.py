"""The built-in workspace retrievers over ``WorkspaceRagIndex``: by vector and by words.

Both are registered through ``kairox_register_workspace_retrievers`` like any plugin's,
so every profile gets them unless ``[workspace] disabled_retrievers`` names them. Fused
together they make the workspace search hybrid by default. They share one index object
(:func:`kairox.workspace.shared.workspace_index`), which the facade closes on exit.
"""

from __future__ import annotations

from kairox import hookimpl
from kairox.plugin_host.registry import BuildContext, SourceGroup, WorkspaceRetrieverSpec
from kairox.workspace.shared import build_workspace_index, workspace_index

#: A new, unshared index, for callers that build one themselves (and close it).
build_index = build_workspace_index


def dense_retriever(ctx: BuildContext):
    from kairox.workspace.rag_index import WorkspaceDenseRetriever

    weight = ctx.workspace.vector_weight if ctx.workspace is not None else None
    return WorkspaceDenseRetriever(workspace_index(ctx), name="workspace", fusion_weight=weight)


def lexical_retriever(ctx: BuildContext):
    from kairox.workspace.rag_index import WorkspaceLexicalRetriever

    return WorkspaceLexicalRetriever(workspace_index(ctx), name="workspace-fts")


@hookimpl
def kairox_register_workspace_retrievers(register):
    register(
        WorkspaceRetrieverSpec(
            name="workspace",
            factory=dense_retriever,
            description="Workspace chunks by embedding similarity ([workspace] embedding_backend).",
            group=SourceGroup.WORKSPACE,
        )
    )
    register(
        WorkspaceRetrieverSpec(
            name="workspace-fts",
            factory=lexical_retriever,
            description="Workspace chunks and paths by words (FTS5 BM25).",
            group=SourceGroup.WORKSPACE,
        )
    )
