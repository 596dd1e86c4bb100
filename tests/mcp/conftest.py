"""Fixtures for the MCP server: an indexed workspace and ``kairox mcp`` as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP tests need `pip install 'kairox[mcp]'`")

from mcp import StdioServerParameters

from kairox.runtime.facade import AppFacade

NOTES = "# Uploads\n\nFailed uploads retry three times with exponential backoff.\n"
GUIDE = "# Style\n\nCommits follow Conventional Commits with a scope prefix.\n"


@pytest.fixture
def indexed_workspace(workspace: Path) -> Path:
    """A workspace with two notes, indexed into the test's ``KAIROX_HOME``."""
    (workspace / "notes.md").write_text(NOTES)
    (workspace / "guide.md").write_text(GUIDE)
    # Both workspace retrievers (hashing's default keeps words only): hits are found by each.
    (workspace / "kairox.toml").write_text("[workspace]\nvectors = true\n")
    AppFacade(cwd=workspace).index_workspace()
    return workspace


@pytest.fixture
def stdio_server(indexed_workspace: Path) -> StdioServerParameters:
    """How the MCP client starts ``kairox mcp`` (stdio) in the workspace."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kairox", "mcp"],
        env=dict(os.environ),
        cwd=str(indexed_workspace),
    )


@pytest.fixture
def kairox_cli(indexed_workspace: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``kairox ARGS`` as another process, the way the user approves from a terminal."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kairox", *args],
            cwd=indexed_workspace,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


@pytest.fixture
def token() -> str:
    return "mcp-test-token-0123456789abcdef"


@pytest.fixture
def http_server(indexed_workspace: Path) -> Iterator[Callable[..., str]]:
    """Start ``kairox mcp --http --port 0`` with extra args; returns its URL. Stopped after."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        process = subprocess.Popen(
            [sys.executable, "-m", "kairox", "mcp", "--http", "--port", "0", *args],
            cwd=indexed_workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        for line in process.stdout:  # the socket listens before the address is printed
            if line.strip().startswith("http://"):
                return line.strip()
        raise AssertionError(f"no address printed; stderr: {process.stderr.read()}")

    yield start
    for process in started:
        process.terminate()
        process.communicate(timeout=30)


@pytest.fixture
def payload() -> Callable[[Any], dict[str, Any]]:
    """A tool result's JSON (the SDK sends it as structured content and as text)."""

    def read(result: Any) -> dict[str, Any]:
        assert not result.is_error, result.content[0].text
        text = json.loads(result.content[0].text)
        assert result.structured_content == text
        return text

    return read
