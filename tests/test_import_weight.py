"""The everyday commands stay light: no heavy backend is imported to print help or list plugins."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "torch",
    "sentence_transformers",
    "boto3",
    "grpc",
    "pinecone",
    "weaviate",
    "tantivy",
    "mcp",
    "langchain_core",
    "llama_index",
)

SCRIPT = """
import json, sys
from kairox.cli import build_cli
try:
    build_cli()(args=sys.argv[1:], prog_name="kairox", standalone_mode=False)
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print("\\nHEAVY=" + json.dumps(heavy))
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["plugins"], ["plugins", "--all"], ["config", "check"], ["mcp", "--help"]],
)
def test_command_imports_no_heavy_backend(args, workspace):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(heavy=set(HEAVY)), *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    marker = result.stdout.rsplit("HEAVY=", 1)[1]
    assert json.loads(marker) == []


def test_the_check_itself_can_fail(workspace):
    """Guard against a vacuous test: the same script does see a module that is imported."""
    script = SCRIPT.format(heavy={"click"})
    result = subprocess.run(
        [sys.executable, "-c", script, "--help"], cwd=workspace, capture_output=True, text=True
    )
    assert "click" in json.loads(result.stdout.rsplit("HEAVY=", 1)[1])


def test_the_python_api_imports_no_heavy_backend(workspace):
    """`import kairox` and `kairox.open()` stay light: the SDKs load only when used."""
    script = (
        "import json, sys, kairox\n"
        "kx = kairox.open('.')\n"
        "kx.memories()\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {set(HEAVY)!r})\n"
        "print('HEAVY=' + json.dumps(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=workspace, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.rsplit("HEAVY=", 1)[1]) == []


# The same script, listing whole module names.
OTHER_COMMANDS = SCRIPT.replace('m.split(".")[0] in', "m in")


@pytest.mark.parametrize("args", [["kb", "--help"], ["kb", "ingest", "--help"]])
def test_a_command_imports_no_other_command(args, workspace):
    """Built-in commands are imported when they run: ``kb ingest`` pays for none of the others."""
    others = {
        f"kairox.cli.{name}_cmd"
        for name in ("index", "search", "memory", "chat", "bench", "serve", "mcp", "tui")
    }
    result = subprocess.run(
        [sys.executable, "-c", OTHER_COMMANDS.format(heavy=others), *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
    assert json.loads(result.stdout.rsplit("HEAVY=", 1)[1]) == []


def test_help_still_lists_every_command(workspace):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(heavy=set()), "--help"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for name in ("config", "index", "search", "kb", "memory", "chat", "mcp", "tui", "plugins"):
        assert f"  {name} " in result.stdout
