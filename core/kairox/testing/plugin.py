"""Checks every knowledge-base plugin package must pass, whatever its source does.

A plugin's tests subclass :class:`PluginConformance` and name the plugin::

    class TestMinePlugin(PluginConformance):
        plugin = kairox_mine
        kind = "mine"
        distribution = "kairox-mine"
        config_model = kairox_mine.MineConfig
        lazy_modules = ("mine_sdk",)  # what importing the plugin must not import
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import ModuleType
from typing import Any, ClassVar

from kairox.testing.build import check_kind_registration
from kairox.testing.processes import python_process

__all__ = ["PluginConformance"]


class PluginConformance:
    """The kind registers cleanly, importing the plugin (and Kairox's start-up, which
    imports every plugin) leaves its heavy dependencies unloaded, and ``kairox plugins``
    lists the installed distribution as ``ok``."""

    #: The plugin module (the one its ``kairox`` entry point names).
    plugin: ClassVar[ModuleType]
    #: The knowledge-base kind it registers, which is also its ``kairox plugins`` name.
    kind: ClassVar[str]
    #: The installed distribution, e.g. ``"kairox-mine"``.
    distribution: ClassVar[str]
    #: The kind's config model; the factory is the plugin's ``build_source``.
    config_model: ClassVar[type]
    #: Top-level modules that importing the plugin must not import (loaded on first use);
    #: ``()`` for a plugin without heavy dependencies (the import must still succeed).
    lazy_modules: ClassVar[tuple[str, ...]]
    #: More of the plugin's modules to import in that check (e.g. its ``testing`` module).
    also_imported: ClassVar[tuple[str, ...]] = ()
    #: The hook ``kairox plugins`` must list.
    hook: ClassVar[str] = "kairox_register_knowledge_base_kinds"

    def test_registers_the_kind(self) -> None:
        registered = check_kind_registration(self.plugin, self.kind)
        assert registered.config_model is self.config_model
        assert registered.factory is self.plugin.build_source

    def test_importing_the_plugin_leaves_its_dependencies_unloaded(self) -> None:
        modules = ", ".join((self.plugin.__name__, *self.also_imported))
        code = (
            f"import sys, {modules}\n"
            "from kairox.plugin_host.manager import KairoxPluginManager\n"
            "KairoxPluginManager()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            f"{set(self.lazy_modules)!r}))"
        )
        result = python_process(code, timeout=120)
        assert result.stdout.strip() == "[]", result.stdout

    def test_kairox_plugins_lists_the_plugin_as_ok(self) -> None:
        check_listed_by_kairox_plugins(self.kind, self.distribution, self.hook)


def check_listed_by_kairox_plugins(name: str, package: str, hook: str) -> dict[str, Any]:
    """Run ``kairox plugins --json`` as a user would and assert the plugin is listed ``ok``.

    The plugin must be installed (``pip install -e .``); returns its JSON entry.
    """
    result = subprocess.run(
        [sys.executable, "-m", "kairox", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "KAIROX_LOAD_PLUGINS"},
    )
    listed = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert name in listed, f"{name!r} not listed; is {package} installed? {result.stdout}"
    entry = listed[name]
    assert entry["status"] == "ok", entry
    assert entry["package"] == package
    assert hook in entry["hooks"]
    return entry
