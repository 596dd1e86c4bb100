"""Fixtures for the memory browser: a real database, the real app, a real server thread."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient

from kairox.memory import extract_memory_markers
from kairox.memory.approvals import TurnProposals
from kairox.runtime.facade import AppFacade
from kairox.web import CSRF_HEADER, create_app

ORIGIN = "http://testserver"  # TestClient's base URL, so its Host header matches


@pytest.fixture
def facade(workspace: Path) -> AppFacade:
    """The test workspace's facade over the isolated $KAIROX_HOME database."""
    return AppFacade(cwd=workspace)


@pytest.fixture
def propose(facade: AppFacade) -> Callable[..., TurnProposals]:
    """Record one model turn's ``<memory>`` markers, as a chat session would."""

    def run(
        text: str,
        *,
        session_id: str = "chat-1",
        turn_id: str | None = "turn-1",
        tool_output: bool = False,
        workspace_id: str | None = None,
    ) -> TurnProposals:
        _, markers, rejected = extract_memory_markers(text)
        return facade.memory.handle_turn(
            markers,
            rejected,
            session_id=session_id,
            workspace_id=workspace_id or facade.workspace_id,
            turn_id=turn_id,
            context_had_tool_output=tool_output,
        )

    return run


def csrf_token_of(page_html: str) -> str:
    """The CSRF token the page embeds for its script."""
    found = re.search(r'name="kairox-csrf-token" content="([^"]+)"', page_html)
    assert found, "the page embeds no CSRF token"
    return found.group(1)


@pytest.fixture
def csrf_of() -> Callable[[str], str]:
    """Read the CSRF token out of a page (for clients other than :func:`web`)."""
    return csrf_token_of


class Web:
    """A TestClient on the app plus the headers the page's script would send."""

    def __init__(self, app: Starlette, client: TestClient) -> None:
        self.app = app
        self.client = client
        self.csrf = csrf_token_of(client.get("/").text)
        self.headers = {"Origin": ORIGIN, CSRF_HEADER: self.csrf}

    def list(self, **params: str) -> list[dict[str, Any]]:
        response = self.client.get("/api/memories", params=params)
        assert response.status_code == 200, response.text
        return response.json()["memories"]

    def send(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        headers = {**self.headers, **options.pop("headers", {})}
        if body is not None:
            options["json"] = body
        return self.client.request(method, path, headers=headers, **options)


@pytest.fixture
def web(facade: AppFacade) -> Iterator[Web]:
    """The real app over the real database, no token, called as the page would."""
    app = create_app(lambda: facade, token=None, allowed_origin=ORIGIN)
    with TestClient(app) as client:
        yield Web(app, client)


@contextmanager
def _serve(app: Any, sock: socket.socket) -> Iterator[None]:
    """Serve ``app`` with uvicorn on ``sock`` in a background thread until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture
def serve_in_thread() -> Callable[[Any, socket.socket], Any]:
    """``with serve_in_thread(app, sock):`` runs a real uvicorn server for the block."""
    return _serve


READ_MEMORIES = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from kairox.cli.memory_cmd import record_json
    from kairox.runtime.facade import AppFacade

    facade = AppFacade(cwd=Path(sys.argv[1]))
    print(json.dumps({
        "approved": [record_json(r) for r in facade.memories()],
        "session": [record_json(r) for r in facade.memories(scope="session")],
        "pending": [record_json(r) for r in facade.memories(pending=True)],
    }))
    """
)


@pytest.fixture
def memories_from_another_process(workspace: Path) -> Callable[[], dict[str, list[dict]]]:
    """What a separate ``AppFacade`` process on the same $KAIROX_HOME sees, as JSON."""

    def read() -> dict[str, list[dict]]:
        result = subprocess.run(
            [sys.executable, "-c", READ_MEMORIES, str(workspace)],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    return read
