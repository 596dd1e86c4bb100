"""Kairox: a plugin-driven retrieval and context platform for LLM agents.

A plugin imports everything it needs from here (``from kairox import hookimpl,
KnowledgeBaseConfig, KnowledgeBaseKind, Query, Hit, ScoreKind``). Names other than
``hookimpl`` load their module on first access, so ``import kairox`` stays light.
"""

from __future__ import annotations

import importlib
import os

# Not ``from typing import ...``, and pluggy on first use of ``hookimpl``: the ``kairox``
# console script (kairox.launcher) imports this package before it asks a running daemon,
# and every import here is paid by each ``kairox search``.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import pluggy

    hookimpl: pluggy.HookimplMarker


def get_plugin_manager():
    """The process-wide plugin manager (see :func:`kairox.plugins.get_plugin_manager`)."""
    from kairox.plugins import get_plugin_manager as _get

    return _get()


def open(
    path: str | os.PathLike[str] | None = None, profile: str | None = None, **options: Any
) -> Kairox:
    """Open a workspace for the Python API (see :func:`kairox.api.open` and docs/python-api.md)."""
    # Through importlib, like the plugin API below: plugins import this package, and the
    # layering check would otherwise see them reach the API above the facade.
    return importlib.import_module("kairox.api").open(path, profile, **options)


# -- the plugin API, imported on first access ------------------------------------------

_PLUGIN_API = {
    # registration records (kairox.hookspecs says which hook takes which)
    "BuildContext": "kairox.registry",
    "ConverterSpec": "kairox.registry",
    "EmbeddingBackendSpec": "kairox.registry",
    "KnowledgeBaseKind": "kairox.registry",
    "ModelBackendSpec": "kairox.registry",
    "QueryTransformSpec": "kairox.registry",
    "RerankerSpec": "kairox.registry",
    "StageContext": "kairox.registry",
    "SummarizerSpec": "kairox.registry",
    "WorkspaceRetrieverSpec": "kairox.registry",
    # a register hook made from a table of those records
    "registers": "kairox.registry",
    # the config base class of a knowledge-base kind's schema
    "KnowledgeBaseConfig": "kairox.config",
    # the base of a backend's, summariser's or search stage's keys in a profile
    "PluginSettings": "kairox.config",
    "EnvVarName": "kairox.secrets",
    # what a source takes and returns
    "Document": "kairox.retrieval",
    "Hit": "kairox.retrieval",
    "Query": "kairox.retrieval",
    "QueryError": "kairox.retrieval",
    "ScoreKind": "kairox.retrieval",
    "Source": "kairox.retrieval",
    "WorkspaceRetriever": "kairox.retrieval",
    # what a search stage takes and returns
    "FusedHit": "kairox.retrieval",
    "TransformedQuery": "kairox.retrieval.stages",
    # errors and optional libraries
    "BackendError": "kairox.errors",
    "BackendTimeoutError": "kairox.errors",
    "KairoxError": "kairox.errors",
    "LazyImport": "kairox.lazy_imports",
    # an embedding backend's batches: hand the memory a native library freed back
    "return_freed_memory": "kairox.native_memory",
    # what a document converter returns, and raises for a file it cannot read
    "Converted": "kairox.workspace.convert.base",
    "ConversionError": "kairox.workspace.convert.base",
    "Region": "kairox.workspace.convert.base",
}

if TYPE_CHECKING:
    from kairox.api import Kairox
    from kairox.config import KnowledgeBaseConfig, PluginSettings
    from kairox.errors import BackendError, BackendTimeoutError, KairoxError
    from kairox.lazy_imports import LazyImport
    from kairox.native_memory import return_freed_memory
    from kairox.registry import (
        BuildContext,
        ConverterSpec,
        EmbeddingBackendSpec,
        KnowledgeBaseKind,
        ModelBackendSpec,
        QueryTransformSpec,
        RerankerSpec,
        StageContext,
        SummarizerSpec,
        WorkspaceRetrieverSpec,
        registers,
    )
    from kairox.retrieval import (
        Document,
        FusedHit,
        Hit,
        Query,
        QueryError,
        ScoreKind,
        Source,
        WorkspaceRetriever,
    )
    from kairox.retrieval.stages import TransformedQuery
    from kairox.secrets import EnvVarName
    from kairox.workspace.convert.base import ConversionError, Converted, Region

    __version__: str


def _version() -> str:
    # Read on first use: importlib.metadata costs more than the daemon's whole answer
    # to ``kairox search`` (kairox.launcher).
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kairox")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name == "hookimpl":
        import pluggy

        globals()[name] = value = pluggy.HookimplMarker("kairox")
        return value
    module = _PLUGIN_API.get(name)
    if module is None:
        raise AttributeError(f"module 'kairox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PLUGIN_API) | {"__version__", "hookimpl"})


__all__ = [
    "BackendError",
    "BackendTimeoutError",
    "BuildContext",
    "ConversionError",
    "Converted",
    "ConverterSpec",
    "Document",
    "EmbeddingBackendSpec",
    "EnvVarName",
    "FusedHit",
    "Hit",
    "KairoxError",
    "KnowledgeBaseConfig",
    "KnowledgeBaseKind",
    "LazyImport",
    "ModelBackendSpec",
    "PluginSettings",
    "Query",
    "QueryError",
    "QueryTransformSpec",
    "Region",
    "RerankerSpec",
    "ScoreKind",
    "Source",
    "StageContext",
    "SummarizerSpec",
    "TransformedQuery",
    "WorkspaceRetriever",
    "WorkspaceRetrieverSpec",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "open",
    "registers",
    "return_freed_memory",
]
