"""The plugin host: loading built-in and installed plugins, and building the registries.

``get_plugin_manager()`` builds the manager once per process (never at import time).
Built-ins from :mod:`kairox.default_plugins` load first, then the ``kairox`` entry-point
group, filtered by the ``KAIROX_LOAD_PLUGINS`` allow-list. A plugin that fails (import
error, bad hook signature, a hook that raises, a name another plugin already took) is
recorded with its reason and contributes nothing; every other plugin keeps working.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from kairox.plugin_host import hookspecs
from kairox.plugin_host.registry import Registry, Table

ENTRY_POINT_GROUP = "kairox"
ALLOW_LIST_ENV = "KAIROX_LOAD_PLUGINS"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "kairox.default_plugins.converters",
    "kairox.default_plugins.hashing_embedder",
    "kairox.default_plugins.openai_compatible",
    "kairox.default_plugins.query_transforms",
    "kairox.default_plugins.rerankers",
    "kairox.default_plugins.scripted_model",
    "kairox.default_plugins.sqlite_fts",
    "kairox.default_plugins.summarizers",
    "kairox.default_plugins.workspace_rag",
)

# hook name -> Registry attribute it fills
REGISTER_HOOKS: dict[str, str] = {
    "kairox_register_embedding_backends": "embedding_backends",
    "kairox_register_workspace_retrievers": "workspace_retrievers",
    "kairox_register_knowledge_base_kinds": "knowledge_base_kinds",
    "kairox_register_summarizers": "summarizers",
    "kairox_register_model_backends": "model_backends",
    "kairox_register_rerankers": "rerankers",
    "kairox_register_query_transforms": "query_transforms",
    "kairox_register_converters": "converters",
}


class PluginError(Exception):
    """A plugin could not be loaded or registered; the original error is chained."""


@dataclass
class PluginInfo:
    """What ``kairox plugins`` reports about one plugin."""

    name: str
    package: str | None
    version: str | None
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    error: PluginError | None = None
    #: What the plugin says about its state (e.g. an optional library missing, with the
    #: install command); from its module's ``kairox_plugin_notes()``, if it has one.
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "failed" if self.error else "ok"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "package": self.package,
            "version": self.version,
            "builtin": self.builtin,
            "hooks": self.hooks,
            "status": self.status,
        }
        if self.notes:
            data["notes"] = list(self.notes)
        if self.error is not None:
            data["error"] = str(self.error)
            cause = self.error.__cause__
            if cause is not None:
                data["traceback"] = "".join(
                    traceback.format_exception(type(cause), cause, cause.__traceback__)
                )
        return data


def allow_list_from_env(environ: dict[str, str] | os._Environ[str] = os.environ) -> set[str] | None:
    """``None`` when unset (load everything); otherwise the allowed names (empty = none)."""
    raw = environ.get(ALLOW_LIST_ENV)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


class KairoxPluginManager(pluggy.PluginManager):
    """A pluggy manager that knows Kairox's hookspecs, plugin metadata and registries."""

    def __init__(self) -> None:
        super().__init__("kairox")
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self._registry: Registry | None = None

    # -- loading ---------------------------------------------------------------

    def load_builtins(self, modules: Iterable[str] = BUILTIN_PLUGINS) -> None:
        version = _core_version()
        for module_name in modules:
            info = PluginInfo(module_name, "kairox", version, builtin=True)
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                self._fail(info, f"built-in plugin {module_name!r} failed to import: {exc}", exc)
                continue
            self.add_plugin(module, info)

    def load_entry_points(self, allow: set[str] | None = None) -> None:
        """Load the ``kairox`` entry-point group once, honouring the allow-list."""
        seen: set[tuple[str, str]] = set()
        points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        for ep in sorted(points, key=lambda p: (p.name, p.value)):
            if (ep.name, ep.value) in seen:  # one distribution seen twice on sys.path
                continue
            seen.add((ep.name, ep.value))
            dist = ep.dist
            package = dist.metadata["Name"] if dist is not None else None
            version = dist.version if dist is not None else None
            if allow is not None and ep.name not in allow and package not in allow:
                continue
            info = PluginInfo(ep.name, package, version, builtin=False)
            try:
                module = ep.load()
            except Exception as exc:
                self._fail(
                    info,
                    f"plugin {ep.name!r} (package {package or 'unknown'}) failed to import: "
                    f"{type(exc).__name__}: {exc}",
                    exc,
                )
                continue
            self.add_plugin(module, info)

    def add_plugin(self, plugin: ModuleType | object, info: PluginInfo) -> bool:
        """Register one plugin object; on failure record why and leave it out."""
        existing = self.infos.get(info.name)
        if existing is not None and existing.error is None:
            error = PluginError(
                f"plugin name {info.name!r} from package {info.package!r} is already taken "
                f"by package {existing.package!r}. Uninstall one of them."
            )
            info.error = error
            # Listed under its own key: the healthy plugin keeps the name.
            self.infos[f"{info.name} ({info.package})"] = info
            return False
        try:
            self.register(plugin, name=info.name)
        except Exception as exc:
            self._fail(info, f"plugin {info.name!r} could not be registered: {exc}", exc)
            return False
        try:
            self.check_pending()
        except pluggy.PluginValidationError as exc:
            self.unregister(name=info.name)
            self._fail(info, f"plugin {info.name!r} implements an unknown hook: {exc}", exc)
            return False
        info.hooks = sorted(c.name for c in self.get_hookcallers(plugin) or [])
        self.infos[info.name] = info
        return True

    def remove_plugin(self, name: str) -> None:
        """Unregister a plugin and forget it, failed or not (tests use this in ``finally``)."""
        if self.get_plugin(name) is not None:
            self.unregister(name=name)
        self.infos.pop(name, None)
        self._registry = None

    def _fail(self, info: PluginInfo, message: str, cause: BaseException | None = None) -> None:
        error = PluginError(message)
        error.__cause__ = cause
        info.error = error
        # A failed plugin keeps its name in the listing but contributes nothing.
        if self.get_plugin(info.name) is not None:
            self.unregister(name=info.name)
        self.infos[info.name] = info
        self._registry = None

    # -- pluggy overrides: any change of plugins invalidates the registries --------

    def register(self, plugin: object, name: str | None = None) -> str | None:
        self._registry = None
        return super().register(plugin, name)

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        self._registry = None
        result = super().unregister(plugin, name)
        registered_name = name or (self.get_name(plugin) if plugin is not None else None)
        if registered_name in self.infos and self.infos[registered_name].error is None:
            del self.infos[registered_name]
        return result

    # -- registries -------------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """What every healthy plugin registered; built on first use, rebuilt on change."""
        if self._registry is None:
            self._registry = self._build_registry()
        return self._registry

    def _build_registry(self) -> Registry:
        registry = Registry()
        for name in list(self.infos):
            info = self.infos[name]
            plugin = self.get_plugin(name)
            if info.error is not None or plugin is None:
                continue
            staged, error = self._collect(plugin, name)
            if error is None:
                error = _commit(staged, registry, name)
            if error is not None:
                message, cause = error
                self._fail(info, message, cause)
        self._registry = registry
        return registry

    def _collect(
        self, plugin: object, name: str
    ) -> tuple[list[tuple[str, Any]], tuple[str, BaseException] | None]:
        """Call this plugin's register hooks, staging what it registers."""
        staged: list[tuple[str, Any]] = []
        for hook_name, attr in REGISTER_HOOKS.items():
            if not any(i.plugin is plugin for i in getattr(self.hook, hook_name).get_hookimpls()):
                continue

            def register(item: Any, _attr: str = attr) -> None:
                staged.append((_attr, item))

            try:
                self.call_for_plugin(hook_name, plugin, register=register)
            except Exception as exc:
                return staged, (
                    f"plugin {name!r} raised in {hook_name}: {type(exc).__name__}: {exc}",
                    exc,
                )
        return staged, None

    def call_for_plugin(self, hook_name: str, plugin: object, **kwargs: Any) -> list[Any]:
        """Call hook ``hook_name`` of ``plugin`` alone, through pluggy.

        The call goes through pluggy's own hook execution (a subset caller that leaves
        the other plugins out), so tracing and ``add_hookcall_monitoring`` see it, and
        each plugin's hooks can be called one plugin at a time: callers stage what the
        plugin registers and keep all of it or none (a plugin that raises half-way
        leaves nothing behind). The plugin's exception propagates unchanged.
        """
        others = [other for other in self.get_plugins() if other is not plugin]
        return self.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)

    def plugin_infos(self, *, include_builtins: bool = False) -> list[PluginInfo]:
        self.registry  # noqa: B018 - building the registries records registration failures
        infos = [i for i in self.infos.values() if include_builtins or not i.builtin]
        for info in infos:
            info.notes = self._notes(info.name)
        return sorted(infos, key=lambda i: (not i.builtin, i.name))

    def _notes(self, name: str) -> list[str]:
        notes = getattr(self.get_plugin(name), "kairox_plugin_notes", None)
        if not callable(notes):
            return []
        try:
            return [str(note) for note in notes()]
        except Exception as exc:  # a note is informative; never let it break the listing
            return [f"kairox_plugin_notes() failed: {type(exc).__name__}: {exc}"]

    def failures(self) -> list[PluginInfo]:
        self.registry  # noqa: B018
        return [i for i in self.infos.values() if i.error is not None]


def _commit(
    staged: list[tuple[str, Any]], registry: Registry, plugin: str
) -> tuple[str, BaseException] | None:
    """Add a plugin's staged items all together, or none of them."""
    added: list[tuple[Table[Any], str]] = []
    for attr, item in staged:
        table: Table[Any] = getattr(registry, attr)
        try:
            table.add(item, plugin)
        except (TypeError, ValueError) as exc:
            for done_table, done_name in added:
                del done_table.entries[done_name]
            return str(exc), exc
        added.append((table, item.name))
    return None


def _core_version() -> str:
    # Not ``kairox.__version__``: the package root sits above the plugin host.
    try:
        return importlib.metadata.version("kairox")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def build_plugin_manager(
    *, builtins: bool = True, entry_points: bool = True, allow: set[str] | None = None
) -> KairoxPluginManager:
    """A fresh manager (tests use this to stay isolated from the process-wide one)."""
    pm = KairoxPluginManager()
    if builtins:
        pm.load_builtins()
    if entry_points:
        pm.load_entry_points(allow)
    return pm


_manager: KairoxPluginManager | None = None


def get_plugin_manager() -> KairoxPluginManager:
    """The process-wide plugin manager, built on first call."""
    global _manager
    if _manager is None:
        _manager = build_plugin_manager(allow=allow_list_from_env())
    return _manager
