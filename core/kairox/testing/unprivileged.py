"""Run Python code where file permissions apply, for tests of unreadable files.

As root, ``chmod 000`` hides nothing: the ``dac_override`` and ``dac_read_search``
capabilities let root read anyway. :func:`run_unprivileged` runs a snippet in a new
process with those capabilities dropped (through util-linux's ``setpriv``) when the test
runs as root, and as it is otherwise; :func:`require_permissions` skips a test, with the
reason, where neither works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

__all__ = ["require_permissions", "run_unprivileged"]

_DROP = "-dac_override,-dac_read_search"


def _prefix() -> list[str] | None:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, f"--inh-caps={_DROP}", f"--bounding-set={_DROP}"]


def require_permissions(probe_dir: Path) -> None:
    """Skip the calling test unless a ``chmod 000`` file really is unreadable to
    :func:`run_unprivileged` (root without ``setpriv``, or a file system ignoring modes)."""
    prefix = _prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable")
    probe = probe_dir / "unreadable-probe"
    probe.write_text("secret")
    probe.chmod(0)
    try:
        done = run_unprivileged(f"open({str(probe)!r}).read()")
    finally:
        probe.chmod(0o600)
        probe.unlink()
    if done.returncode == 0:
        pytest.skip("a chmod 000 file stays readable here (capabilities could not be dropped)")


def run_unprivileged(
    code: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c code args...`` without the capabilities that bypass file permissions."""
    prefix = _prefix() or []
    return subprocess.run(
        [*prefix, sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
