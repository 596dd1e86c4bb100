"""Running Python, the ``kairox`` command and shell scripts as new processes, the way a user
runs them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["kairox_process", "python_process", "shell_process"]


def python_process(
    code: str, *, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (this one's), assert that it exited 0 (the
    assertion shows its stderr), and return the finished process for its output."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def kairox_process(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m kairox ARGS``; the finished process, whatever its exit status."""
    return subprocess.run(
        [sys.executable, "-m", "kairox", *args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def shell_process(
    script: str,
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``bash -euo pipefail`` (the first failing command fails it),
    ``args`` as its ``$0``, ``$1``...; the finished process, whatever its exit status."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script, *args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
