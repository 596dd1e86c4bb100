"""docs/mcp.md's client configurations parse and start the command this package installs."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from kairox.cli import build_cli

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.DOTALL)


def test_every_client_snippet_parses_and_names_a_real_command():
    servers = [json.loads(block)["mcpServers"]["kairox"] for block in _blocks("json")]
    servers += [tomllib.loads(block)["mcp_servers"]["kairox"] for block in _blocks("toml")]
    assert len(servers) == 4
    stdio = [s for s in servers if "command" in s]
    http = [s for s in servers if "url" in s]
    assert len(stdio) == 2 and len(http) == 2
    for server in stdio:
        assert server["command"] == "kairox"
        assert set(server["env"]) == {"KAIROX_HOME"}  # clients that drop the environment
        result = CliRunner().invoke(build_cli(), [*server["args"], "--help"])
        assert result.exit_code == 0 and "MCP client" in result.output
    for server in http:
        assert re.fullmatch(r"http://[\d.]+:8766/mcp", server["url"])


def test_the_documented_default_port_is_the_real_default():
    result = CliRunner().invoke(build_cli(), ["mcp", "--help"])
    assert re.search(r"--port.*\[default: 8766;", " ".join(result.output.split()))


@pytest.mark.anyio
async def test_the_env_block_carries_kairox_home_to_a_client_that_drops_the_environment(
    indexed_workspace: Path, payload
):
    """As MCP Inspector 2.x starts a server: the SDK's few safe variables, nothing else."""
    passed_on = get_default_environment()
    if "PYTHONPATH" in os.environ:  # the code under test, as this test process imports it
        passed_on["PYTHONPATH"] = os.environ["PYTHONPATH"]

    async def search(env: dict[str, str]) -> dict:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "kairox", "mcp"],
            env=env,
            cwd=str(indexed_workspace),
        )
        async with Client(server) as client:
            return payload(await client.call_tool("search", {"query": "failed uploads retry"}))

    lost = await search(passed_on)  # the state is elsewhere: no index there
    assert lost["hits"] == [] and "not indexed" in lost["sources"][0]["error"]
    found = await search({**passed_on, "KAIROX_HOME": os.environ["KAIROX_HOME"]})
    assert found["hits"][0]["uri"].endswith("notes.md")
