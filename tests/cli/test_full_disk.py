"""A full disk under ``$KAIROX_HOME``: one line naming the folder and what to free, exit 1,
and a database that stays consistent (kairox.support.paths.disk_full_errors, kairox.cli.app)."""

from __future__ import annotations

import os
import random
import shutil
import string
import subprocess
import sys
from pathlib import Path

import pytest

#: Runs "$@" with a fresh tmpfs of $TMPFS_SIZE mounted on $TMPFS_AT, in a private mount
#: namespace: nothing is mounted for anyone else, and it is gone when the command ends.
IN_TINY_DISK = 'mount -t tmpfs -o size="$TMPFS_SIZE" tmpfs "$TMPFS_AT" && exec "$@"'


def _on_tiny_disk(
    at: Path, size: str, *command: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("util-linux's unshare is not installed: no private tmpfs to fill")
    return subprocess.run(
        [unshare, "--mount", "--map-root-user", "sh", "-c", IN_TINY_DISK, "sh", *command],
        cwd=cwd,
        env={**env, "TMPFS_AT": str(at), "TMPFS_SIZE": size},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tiny_disk_available(tmp_path: Path) -> None:
    at = tmp_path / "probe"
    at.mkdir()
    probe = _on_tiny_disk(at, "64k", "true", cwd=tmp_path, env=dict(os.environ))
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private tmpfs here ({probe.stderr.strip()[:200]})")


def _fill_with_words(workspace: Path) -> None:
    rng = random.Random(7)
    for number in range(40):  # ~400 KB of words that do not compress into an index
        words = ("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(12 * 120))
        (workspace / f"notes-{number}.md").write_text(" ".join(words) + "\n")


def test_index_on_a_full_disk_says_so_in_one_line(tiny_disk_available, workspace, tmp_path):
    _fill_with_words(workspace)
    disk = tmp_path / "disk"
    disk.mkdir()
    home = disk / "home"
    script = (
        "import sqlite3, subprocess, sys\n"
        "run = subprocess.run([sys.executable, '-m', 'kairox', 'index', '.'])\n"
        "database = sys.argv[1]\n"
        "check = sqlite3.connect(database).execute('PRAGMA integrity_check').fetchall()\n"
        "print('exit', run.returncode, 'integrity', check[0][0])\n"
    )
    result = _on_tiny_disk(
        disk,
        "320k",
        sys.executable,
        "-c",
        script,
        str(home / "kairox.db"),
        cwd=workspace,
        env={**os.environ, "KAIROX_HOME": str(home)},
    )
    assert "exit 1 integrity ok" in result.stdout, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "OperationalError" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"the disk holding {home} is full; free some space on it" in line
    assert "KAIROX_HOME" in line


def test_kb_ingest_on_a_full_disk_names_the_knowledge_bases_folder(
    tiny_disk_available, workspace, tmp_path
):
    _fill_with_words(workspace)
    disk = tmp_path / "disk"
    disk.mkdir()
    (workspace / "kairox.toml").write_text(
        f'[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "{disk / "kb" / "papers.db"}"\n'
    )
    result = _on_tiny_disk(
        disk,
        "320k",
        sys.executable,
        "-m",
        "kairox",
        "kb",
        "ingest",
        "papers",
        ".",
        cwd=workspace,
        env={**os.environ, "KAIROX_HOME": str(tmp_path / "state")},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"the disk holding {disk / 'kb'} is full" in line
