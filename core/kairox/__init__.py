"""Kairox: a plugin-driven retrieval and context platform for LLM agents."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pluggy

try:
    __version__ = version("kairox")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

hookimpl = pluggy.HookimplMarker("kairox")


def get_plugin_manager():
    """The process-wide plugin manager (see :func:`kairox.plugins.get_plugin_manager`)."""
    from kairox.plugins import get_plugin_manager as _get

    return _get()


__all__ = ["__version__", "get_plugin_manager", "hookimpl"]
