"""Integration tests drive the CLI with every installed plugin loaded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from kairox.cli import build_cli
from kairox.plugins import build_plugin_manager


@pytest.fixture(scope="module")
def plugin_manager():
    return build_plugin_manager()


@pytest.fixture
def invoke(plugin_manager) -> Callable[..., Result]:
    """Run ``kairox ARGS`` in-process with the built-ins and every installed plugin."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(build_cli(plugin_manager), list(args))

    return run
