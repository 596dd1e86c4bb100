"""Kairox: a plugin-driven retrieval and context platform for LLM agents.

A plugin imports everything it needs from here (``from kairox import hookimpl,
KnowledgeBaseConfig, KnowledgeBaseKind, Query, Hit, ScoreKind``). Names other than
``hookimpl`` load their module on first access, so ``import kairox`` stays light.
"""

from __future__ import annotations

import importlib
import os

from kairox.support.moved import install as _serve_moved_modules

# The module paths from before the re-layout keep working for one release.
_serve_moved_modules()

# Not ``from typing import ...``, and pluggy on first use of ``hookimpl``: the ``kairox``
# console script (kairox.__main__) imports this package before it asks a running daemon,
# and every import here is paid by each ``kairox search``.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import pluggy

    hookimpl: pluggy.HookimplMarker


def get_plugin_manager():
    """The process-wide plugin manager (see :func:`kairox.plugin_host.manager.get_plugin_manager`)."""
    from kairox.plugin_host.manager import get_plugin_manager as _get

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
    # registration records (kairox.plugin_host.hookspecs says which hook takes which)
    "BuildContext": "kairox.plugin_host.registry",
    "ConverterSpec": "kairox.plugin_host.registry",
    "EmbeddingBackendSpec": "kairox.plugin_host.registry",
    "KnowledgeBaseKind": "kairox.plugin_host.registry",
    "ModelBackendSpec": "kairox.plugin_host.registry",
    "QueryTransformSpec": "kairox.plugin_host.registry",
    "RerankerSpec": "kairox.plugin_host.registry",
    "StageContext": "kairox.plugin_host.registry",
    "SummarizerSpec": "kairox.plugin_host.registry",
    "WorkspaceRetrieverSpec": "kairox.plugin_host.registry",
    # a register hook made from a table of those records
    "registers": "kairox.plugin_host.registry",
    # the config base class of a knowledge-base kind's schema
    "KnowledgeBaseConfig": "kairox.config.schema",
    # the base of a backend's, summariser's or search stage's keys in a profile
    "PluginSettings": "kairox.config.schema",
    "EnvVarName": "kairox.support.secrets",
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
    "BackendError": "kairox.support.errors",
    "BackendTimeoutError": "kairox.support.errors",
    "KairoxError": "kairox.support.errors",
    "LazyImport": "kairox.support.lazy_imports",
    # an embedding backend's batches: hand the memory a native library freed back
    "return_freed_memory": "kairox.support.native_memory",
    # what a document converter returns, and raises for a file it cannot read
    "Converted": "kairox.workspace.convert.base",
    "ConversionError": "kairox.workspace.convert.base",
    "Region": "kairox.workspace.convert.base",
    # sessions fed from your own agent loop (docs/python-api.md)
    "AppendResult": "kairox.runtime.session",
    "MessageError": "kairox.store.messages",
    "RecordedMessage": "kairox.store.messages",
    "SessionBusyError": "kairox.runtime.session",
    "SessionMessage": "kairox.store.messages",
    "SessionSummary": "kairox.store.messages",
    "TurnResult": "kairox.runtime.session",
}

if TYPE_CHECKING:
    from kairox.api import Kairox
    from kairox.config.schema import KnowledgeBaseConfig, PluginSettings
    from kairox.plugin_host.registry import (
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
    from kairox.runtime.session import AppendResult, SessionBusyError, TurnResult
    from kairox.store.messages import MessageError, RecordedMessage, SessionMessage, SessionSummary
    from kairox.support.errors import BackendError, BackendTimeoutError, KairoxError
    from kairox.support.lazy_imports import LazyImport
    from kairox.support.native_memory import return_freed_memory
    from kairox.support.secrets import EnvVarName
    from kairox.workspace.convert.base import ConversionError, Converted, Region

    __version__: str


def _version() -> str:
    # Read on first use: importlib.metadata costs more than the daemon's whole answer
    # to ``kairox search`` (kairox.__main__).
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
    "AppendResult",
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
    "MessageError",
    "ModelBackendSpec",
    "PluginSettings",
    "Query",
    "QueryError",
    "QueryTransformSpec",
    "RecordedMessage",
    "Region",
    "RerankerSpec",
    "ScoreKind",
    "SessionBusyError",
    "SessionMessage",
    "SessionSummary",
    "Source",
    "StageContext",
    "SummarizerSpec",
    "TransformedQuery",
    "TurnResult",
    "WorkspaceRetriever",
    "WorkspaceRetrieverSpec",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "open",
    "registers",
    "return_freed_memory",
]
