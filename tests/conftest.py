"""Shared fixtures: every test runs with its own HOME, config and state folders."""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kairox.memory.store import MemoryRecord


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME, XDG folders and KAIROX_HOME; the cwd is an empty workspace."""
    home = tmp_path / "home"
    workspace = tmp_path / "workspace"
    for folder in (home, workspace):
        folder.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("KAIROX_HOME", str(home / "kairox-state"))
    monkeypatch.delenv("KAIROX_LOAD_PLUGINS", raising=False)
    monkeypatch.chdir(workspace)
    return workspace


@pytest.fixture
def workspace(isolated_environment: Path) -> Path:
    """The current folder of the test: an empty workspace."""
    return isolated_environment


@pytest.fixture
def all_at_once() -> Callable[..., list[object]]:
    """``all_at_once(*calls)``: each call in a thread of its own, all released together.

    Returns the calls' results in order; the first exception raised is raised again.
    """

    def start_together(*calls: Callable[[], object]) -> list[object]:
        barrier = threading.Barrier(len(calls))

        def start(call: Callable[[], object]) -> object:
            barrier.wait()
            return call()

        with ThreadPoolExecutor(len(calls)) as pool:
            return list(pool.map(start, calls))

    return start_together


@pytest.fixture
def make_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Path]]:
    """Fake an installed plugin distribution: a module plus a ``.dist-info`` with entry points.

    ``importlib.metadata`` finds it exactly as it finds a pip-installed package, so the
    plugin loader is exercised for real. Returns the folder to put on ``PYTHONPATH`` for
    subprocesses; the current process gets it on ``sys.path`` until the test ends.
    """
    site = tmp_path / "site-packages"
    site.mkdir()
    modules: list[str] = []

    def make(package: str, module: str, source: str, entry_name: str | None = None) -> Path:
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        dist_info = site / f"{package.replace('-', '_')}-0.1.0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1.0\n"
        )
        (dist_info / "entry_points.txt").write_text(
            f"[kairox]\n{entry_name or module} = {module}\n"
        )
        modules.append(module)
        return site

    monkeypatch.syspath_prepend(str(site))
    yield make
    for module in modules:
        sys.modules.pop(module, None)


#: A default profile on the scripted model: turns run without any model server.
SCRIPTED_DEFAULT_PROFILE = """
[profiles.default]
model = "scripted-model"
backend = "scripted"
context_window = 8000
headroom = 500
"""

#: The scripted default profile plus two small ones for session tests: ``tiny`` (a 900-token
#: window that compacts with the extractive summariser) and ``flaky`` (the llm summariser).
SESSION_PROFILES = (
    SCRIPTED_DEFAULT_PROFILE
    + """
[profiles.tiny]
model = "scripted-model"
backend = "scripted"
context_window = 900
headroom = 100
summarizer = "extractive"

[profiles.flaky]
model = "scripted-model"
backend = "scripted"
context_window = 900
headroom = 100
summarizer = "llm"
"""
)


def memory_record(**fields: Any) -> MemoryRecord:
    """A stored memory for tests: a pending user memory with id 1, unless ``fields`` say
    otherwise (any :class:`~kairox.memory.store.MemoryRecord` field)."""
    from kairox.memory.store import MemoryRecord

    defaults: dict[str, Any] = {
        "id": 1,
        "scope": "user",
        "key": None,
        "body": "",
        "status": "pending",
        "workspace_id": None,
        "session_id": None,
        "created_at": "2026-12-01T00:00:00Z",
        "updated_at": "2026-12-01T00:00:00Z",
        "approved_at": None,
    }
    return MemoryRecord(**{**defaults, **fields})


def set_schema_version(db: Path, component: str, version: int) -> None:
    """Pretend another Kairox wrote ``component``'s tables in ``db``: set their version."""
    import sqlite3

    raw = sqlite3.connect(db)
    with raw:
        raw.execute(
            "UPDATE kairox_schema SET version = ? WHERE component = ?", (version, component)
        )
    raw.close()
