"""The user's workspace: walking its files, chunking them, and the RAG index over them.

Submodules: :mod:`.files` (walk with ``.gitignore`` rules, binary sniffing),
:mod:`.chunking` (token-aware chunks with overlap, and their sentences) and
:mod:`.rag_index` (the SQLite chunk store). The names below are re-exported lazily so
that importing one submodule does not pull in the others' dependencies (tiktoken, numpy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox.workspace.chunking import Chunk, chunk_text, split_sentences
    from kairox.workspace.files import WorkspaceFile, is_binary, iter_workspace_files, read_text

_EXPORTS = {
    "Chunk": "kairox.workspace.chunking",
    "chunk_text": "kairox.workspace.chunking",
    "split_sentences": "kairox.workspace.chunking",
    "WorkspaceFile": "kairox.workspace.files",
    "is_binary": "kairox.workspace.files",
    "iter_workspace_files": "kairox.workspace.files",
    "read_text": "kairox.workspace.files",
}

__all__ = [
    "Chunk",
    "WorkspaceFile",
    "chunk_text",
    "is_binary",
    "iter_workspace_files",
    "read_text",
    "split_sentences",
]


def __getattr__(name: str) -> Any:
    """Import a re-exported name from its submodule on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
