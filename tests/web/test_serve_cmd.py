"""``kairox serve``: safe defaults, clear refusals, and a real server process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from starlette.testclient import TestClient

from kairox.cli import build_cli
from kairox.plugin_host.manager import build_plugin_manager

TOKEN = "a-long-enough-secret-token-0123"


@pytest.fixture
def invoke(monkeypatch):
    """Run ``kairox serve ARGS`` in-process; uvicorn is stopped before it would block."""
    started = []

    def fake_run(server, sockets=None):
        started.append((server.config.app, sockets[0].getsockname()))

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.delenv("KAIROX_SERVE_TOKEN", raising=False)
    cli = build_cli(build_plugin_manager(entry_points=False))

    def run(*args, env=None):
        result = CliRunner().invoke(cli, ["serve", *args], env=env)
        return result, started

    return run


def test_defaults_to_loopback_without_a_token(invoke):
    result, started = invoke("--port", "0")
    assert result.exit_code == 0, result.output
    [(app, (host, port))] = started
    assert host == "127.0.0.1" and port > 0
    assert f"http://127.0.0.1:{port}/" in result.output
    assert "token" not in result.output
    # The app answers at the printed address and nowhere else.
    assert TestClient(app, base_url=f"http://127.0.0.1:{port}").get("/").status_code == 200
    assert TestClient(app, base_url="http://localhost:1").get("/api/memories").status_code == 421


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::"])
def test_a_network_address_needs_a_token(invoke, host):
    result, started = invoke("--host", host, "--port", "0")
    assert result.exit_code == 1
    assert "refusing to serve" in result.output and "--token" in result.output
    assert "KAIROX_SERVE_TOKEN" in result.output
    assert started == []


def test_an_empty_token_from_the_environment_is_no_token(invoke):
    result, started = invoke("--host", "0.0.0.0", env={"KAIROX_SERVE_TOKEN": ""})
    assert result.exit_code == 1 and "refusing to serve" in result.output
    assert started == []


def test_a_short_token_is_refused(invoke):
    result, started = invoke("--token", "hunter2", "--port", "0")
    assert result.exit_code == 1 and "too short" in result.output
    assert started == []


def test_a_wildcard_address_needs_the_origin_browsers_use(invoke):
    result, started = invoke("--host", "0.0.0.0", "--port", "0", env={"KAIROX_SERVE_TOKEN": TOKEN})
    assert result.exit_code == 1 and "--origin" in result.output
    assert started == []
    result, started = invoke(
        "--host", "0.0.0.0", "--port", "0", "--origin", "http://box.lan:8765",
        env={"KAIROX_SERVE_TOKEN": TOKEN},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "http://box.lan:8765/" in result.output and "?token=<your token>" in result.output
    assert TOKEN not in result.output  # the secret is not echoed to the terminal
    assert len(started) == 1


def test_a_bad_origin_is_explained(invoke):
    result, _ = invoke("--origin", "box.lan:8765", "--port", "0")
    assert result.exit_code == 1 and "--origin" in result.output


SERVE = textwrap.dedent(
    """
    from kairox.cli import build_cli
    cli = build_cli()
    cli(args=["serve", "--port", "0"], prog_name="kairox")
    """
)


def test_a_real_server_process(workspace, facade):
    facade.memory.set("user", "editor.font", "Fira", workspace_id=facade.workspace_id)
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE],
        cwd=workspace,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert "Kairox memory browser for" in lines[0], lines
        url = lines[1].strip()
        assert url.startswith("http://127.0.0.1:")
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200 and "Kairox memory" in page.text
        memories = httpx.get(f"{url}api/memories", timeout=10).json()["memories"]
        assert [(m["key"], m["body"]) for m in memories] == [("editor.font", "Fira")]
        refused = httpx.post(f"{url}api/memories", json={"scope": "user", "key": "k", "body": "b"})
        assert refused.status_code == 403
    finally:
        process.terminate()
        process.wait(timeout=15)
    assert [r.key for r in facade.memories()] == ["editor.font"]
