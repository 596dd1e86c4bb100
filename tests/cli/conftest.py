"""Fixtures for driving the CLI, in-process and as a real subprocess."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kairox.cli import build_cli
from kairox.plugin_host.manager import build_plugin_manager
from kairox.testing import processes


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Run ``kairox ARGS`` in-process with the built-ins and no entry-point plugins."""
    pm = build_plugin_manager(entry_points=False)

    def run(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(build_cli(pm), list(args), input=input)

    return run


@pytest.fixture
def kairox_process(workspace: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m kairox ARGS`` as a new process in the test workspace."""

    def run(
        *args: str, pythonpath: Path | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **(env or {})}
        if pythonpath is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(pythonpath), env.get("PYTHONPATH")])
            )
        return processes.kairox_process(*args, cwd=workspace, env=env)

    return run
