"""The module paths of the 2026-12 re-layout: the old names work for one release, with a warning.

Kairox's top-level modules moved into packages by concern (``kairox.config_loader`` is
``kairox.config.loader``, ``kairox.storage`` is ``kairox.store.sqlite``...). An import of an
old name gets the moved module itself (the same object, so monkeypatching through the old
name patches the module in use) and a :class:`DeprecationWarning` naming the new one.
Written by the re-layout script from its table: edit the table there.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "forward_names", "install"]

# old module -> the module it is now
MOVED: dict[str, str] = {
    "kairox.blocking": "kairox.support.blocking",
    "kairox.config": "kairox.config.schema",
    "kairox.config_files": "kairox.config.files",
    "kairox.config_loader": "kairox.config.loader",
    "kairox.config_problems": "kairox.config.problems",
    "kairox.embed_progress": "kairox.support.embed_progress",
    "kairox.embedding": "kairox.retrieval.embedding",
    "kairox.errors": "kairox.support.errors",
    "kairox.event_types": "kairox.store.event_types",
    "kairox.events": "kairox.store.events",
    "kairox.facade": "kairox.runtime.facade",
    "kairox.facade_knowledge_bases": "kairox.runtime.facade_knowledge_bases",
    "kairox.facade_recall": "kairox.runtime.facade_recall",
    "kairox.hookspecs": "kairox.plugin_host.hookspecs",
    "kairox.ingest": "kairox.runtime.ingest",
    "kairox.ingest_ledger": "kairox.runtime.ingest_ledger",
    "kairox.ingest_records": "kairox.runtime.ingest_records",
    "kairox.launcher": "kairox.__main__",
    "kairox.lazy_imports": "kairox.support.lazy_imports",
    "kairox.listening": "kairox.support.listening",
    "kairox.messages": "kairox.store.messages",
    "kairox.models": "kairox.support.models",
    "kairox.native_memory": "kairox.support.native_memory",
    "kairox.paths": "kairox.support.paths",
    "kairox.plugins": "kairox.plugin_host.manager",
    "kairox.registry": "kairox.plugin_host.registry",
    "kairox.retry": "kairox.support.retry",
    "kairox.run_stats": "kairox.support.run_stats",
    "kairox.search_options": "kairox.runtime.search_options",
    "kairox.secrets": "kairox.support.secrets",
    "kairox.session": "kairox.runtime.session",
    "kairox.session_compaction": "kairox.runtime.session_compaction",
    "kairox.session_recording": "kairox.runtime.session_recording",
    "kairox.sources": "kairox.runtime.sources",
    "kairox.storage": "kairox.store.sqlite",
    "kairox.sync": "kairox.runtime.sync",
    "kairox.terminal": "kairox.support.terminal",
}


def _warn(old: str, new: str) -> None:
    # stacklevel 3: past this function and the loader; the import system's own frames are
    # skipped by ``warnings``, so the warning names the line that imported the old name.
    warnings.warn(
        f"{old} is deprecated: import {new} (Kairox's modules moved into packages; "
        "the old name goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )


class _MovedLoader:
    """Loads an old name as the module it moved to."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # a throwaway module; exec_module puts the real one in its place

    def exec_module(self, module: ModuleType) -> None:
        _warn(module.__name__, self.new)
        # The import system hands back what sys.modules holds under the old name once this
        # returns: the moved module itself, whose own spec and attributes stay untouched.
        sys.modules[module.__name__] = importlib.import_module(self.new)


class MovedModuleFinder:
    """A ``sys.meta_path`` finder for the old names; last, so a real module always wins."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return ModuleSpec(fullname, _MovedLoader(new))


def install() -> None:
    """Serve the old names from now on (idempotent; ``import kairox`` calls it)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())


def forward_names(package: str, *modules: str) -> Callable[[str], Any]:
    """A package's ``__getattr__`` for the names a module of the same old name held.

    ``kairox.config`` was a module and is a package now: ``kairox.config.KnowledgeBaseConfig``
    still works, from :mod:`kairox.config.schema`, with a warning.
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for module in modules:
            target = importlib.import_module(module)
            if hasattr(target, name):
                value = getattr(target, name)
                _warn(f"{package}.{name}", f"{module}.{name}")
                setattr(sys.modules[package], name, value)  # later look-ups find it directly
                return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
