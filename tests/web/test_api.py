"""The memory browser's JSON API over a real SQLite database."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx
import pytest
from starlette.testclient import TestClient

from kairox.memory.approvals import Proposer
from kairox.runtime.facade import AppFacade
from kairox.web import CSRF_HEADER, MAX_BODY_BYTES, bind_socket, create_app
from tests.web.conftest import ORIGIN, csrf_token_of

PROPOSALS = (
    '<memory scope="workspace" key="commit.style">Conventional Commits.</memory>'
    '<memory scope="user" key="tone">Be terse.</memory>'
)


def keys(records):
    return [(r["scope"], r["key"], r["status"]) for r in records]


# -- listing -------------------------------------------------------------------------------


def test_list_shows_user_and_workspace_memories_only(web, facade, propose):
    facade.memory.set("user", "editor.font", "JetBrains Mono", workspace_id=facade.workspace_id)
    facade.memory.set("workspace", "test.cmd", "make test", workspace_id=facade.workspace_id)
    facade.memory.set("workspace", "elsewhere", "not here", workspace_id="/other/workspace")
    propose(PROPOSALS + '<memory scope="session">Explain first.</memory>')

    assert keys(web.list()) == [
        ("user", "editor.font", "approved"),
        ("workspace", "test.cmd", "approved"),
    ]
    assert keys(web.list(scope="user")) == [("user", "editor.font", "approved")]
    assert keys(web.list(scope="workspace")) == [("workspace", "test.cmd", "approved")]
    [session] = web.list(scope="session")
    assert (session["scope"], session["session_id"], session["body"]) == (
        "session",
        "chat-1",
        "Explain first.",
    )
    response = web.client.get("/api/memories")
    assert response.json()["count"] == 2
    assert response.headers["cache-control"] == "no-store"


def test_pending_proposals_carry_provenance_and_the_injection_warning(web, propose):
    propose(PROPOSALS, session_id="chat-7", turn_id="turn-3", tool_output=True)
    pending = web.list(status="pending")
    assert keys(pending) == [
        ("workspace", "commit.style", "pending"),
        ("user", "tone", "pending"),
    ]
    first = pending[0]
    assert first["injection_warning"] is True
    assert first["provenance"]["session_id"] == "chat-7"
    assert first["provenance"]["turn_id"] == "turn-3"
    assert first["provenance"]["injection_warning"] is True
    # Every field `kairox memory list --json` prints is there.
    assert {"id", "body", "created_at", "updated_at", "approved_at", "workspace_id"} <= set(first)
    assert keys(web.list(status="pending", scope="user")) == [("user", "tone", "pending")]
    assert web.list(status="pending", scope="session") == []


def test_search_is_a_case_insensitive_substring_over_key_and_body(web, facade, propose):
    ws = facade.workspace_id
    facade.memory.set("user", "editor.font", "JetBrains Mono 14px", workspace_id=ws)
    facade.memory.set("workspace", "commit.style", "Conventional Commits", workspace_id=ws)
    propose('<memory scope="user" key="font.size">Bigger FONTS please.</memory>')

    assert [r["key"] for r in web.list(q="FONT")] == ["editor.font"]
    assert [r["key"] for r in web.list(q="mono 14")] == ["editor.font"]
    assert [r["key"] for r in web.list(q="  commit  ")] == ["commit.style"]
    assert [r["key"] for r in web.list(q="font", status="pending")] == ["font.size"]
    assert [r["key"] for r in web.list(q="font", scope="workspace")] == []
    assert web.list(q="nothing like this") == []


@pytest.mark.parametrize(
    ("params", "word"), [({"scope": "team"}, "scope"), ({"status": "rejected"}, "status")]
)
def test_bad_list_filters_are_400(web, params, word):
    response = web.client.get("/api/memories", params=params)
    assert response.status_code == 400
    assert word in response.json()["error"]


def test_every_read_goes_to_the_database(web, workspace):
    """No UI-side cache: a write by another process shows on the next request."""
    assert web.list() == []
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from kairox.runtime.facade import AppFacade
        facade = AppFacade(cwd=Path(sys.argv[1]))
        facade.memory.set("workspace", "from.elsewhere", "written by the CLI",
                          workspace_id=facade.workspace_id)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(workspace)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [(r["key"], r["body"]) for r in web.list()] == [("from.elsewhere", "written by the CLI")]


# -- writing -------------------------------------------------------------------------------


def test_set_writes_and_overwrites_by_key(web, facade):
    response = web.send(
        "POST", "/api/memories", {"scope": "user", "key": "Editor Font", "body": "Fira"}
    )
    assert response.status_code == 200, response.text
    record = response.json()["memory"]
    assert (record["scope"], record["key"], record["status"]) == ("user", "editor.font", "approved")
    assert record["provenance"]["written_by"] == "user"

    again = web.send(
        "POST", "/api/memories", {"scope": "user", "key": "editor.font", "body": "Iosevka"}
    )
    assert again.json()["memory"]["id"] == record["id"]
    workspace = web.send("POST", "/api/memories", {"scope": "workspace", "key": "k", "body": "v"})
    assert workspace.json()["memory"]["workspace_id"] == facade.workspace_id
    assert [(r.key, r.body) for r in facade.memories()] == [
        ("editor.font", "Iosevka"),
        ("k", "v"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"scope": "session", "key": "k", "body": "b"}, "'user' or 'workspace'"),
        ({"scope": "user", "key": "bad key!", "body": "b"}, "editor.font"),
        ({"scope": "user", "key": "k", "body": "   "}, "body is empty"),
        ({"scope": "user", "key": "k"}, "missing field 'body'"),
        ({"key": "k", "body": "b"}, "missing field 'scope'"),
        ({"scope": "user", "key": 3, "body": "b"}, "'key' must be a string"),
        (["user", "k", "b"], "JSON object"),
    ],
)
def test_set_rejects_bad_input_with_400(web, facade, body, message):
    response = web.send("POST", "/api/memories", body)
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert facade.memories() == []


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (rb'{"scope": "user", "key": "k", "body": "\ud800"}', "body"),
        (rb'{"scope": "user", "key": "k\udfff", "body": "b"}', "key"),
    ],
)
def test_a_lone_surrogate_is_400_not_500(web, facade, raw, field):
    response = web.send("POST", "/api/memories", content=raw)
    assert response.status_code == 400
    assert f"field {field!r} holds a lone surrogate" in response.json()["error"]
    assert facade.memories() == []


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe"])
def test_bad_json_is_400(web, facade, raw):
    response = web.send("POST", "/api/memories", content=raw)
    assert response.status_code == 400
    assert "error" in response.json()
    assert facade.memories() == []


def test_deeply_nested_json_is_400_over_a_real_socket(workspace, facade, serve_in_thread, csrf_of):
    # Found over HTTP: json.loads raised RecursionError and uvicorn answered 500.
    sock = bind_socket("127.0.0.1", 0)
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = create_app(lambda: facade, token=None, allowed_origin=origin)
    with serve_in_thread(app, sock), httpx.Client(base_url=origin) as client:
        headers = {"Origin": origin, CSRF_HEADER: csrf_of(client.get("/").text)}
        nested = '{"scope": "user", "key": "k", "body": ' + "[" * 20_000 + "]" * 20_000 + "}"
        response = client.post("/api/memories", content=nested, headers=headers)
    assert response.status_code == 400
    assert "nests its JSON too deeply" in response.json()["error"]
    assert facade.memories() == []


def test_a_huge_body_is_refused(web, facade):
    body = {"scope": "user", "key": "k", "body": "x" * (MAX_BODY_BYTES + 1)}
    assert web.send("POST", "/api/memories", body).status_code == 413
    assert facade.memories() == []


# -- deciding proposals --------------------------------------------------------------------


def test_approve_moves_a_proposal_into_the_memories(web, facade, propose):
    outcome = propose(PROPOSALS)
    proposal = outcome.pending[0]
    response = web.send("POST", f"/api/memories/{proposal.id}/approve")
    assert response.status_code == 200, response.text
    assert response.json()["memory"]["status"] == "approved"
    assert keys(web.list()) == [("workspace", "commit.style", "approved")]
    assert keys(web.list(status="pending")) == [("user", "tone", "pending")]
    accepted = [e for e in facade.events.list(session_id="chat-1") if e.type == "MemoryAccepted"]
    assert [e.payload["key"] for e in accepted] == ["commit.style"]

    again = web.send("POST", f"/api/memories/{proposal.id}/approve")
    assert again.status_code == 409
    assert "not a pending proposal" in again.json()["error"]


def test_approve_overwrites_the_memory_under_the_same_key(web, facade, propose):
    ws = facade.workspace_id
    old = facade.memory.set("workspace", "commit.style", "Anything goes.", workspace_id=ws)
    proposal = propose(PROPOSALS).pending[0]
    record = web.send("POST", f"/api/memories/{proposal.id}/approve").json()["memory"]
    assert (record["id"], record["body"]) == (old.id, "Conventional Commits.")


def test_reject_keeps_the_reason(web, facade, propose):
    first, second = propose(PROPOSALS).pending
    response = web.send("POST", f"/api/memories/{first.id}/reject", {"reason": "not a convention"})
    assert response.status_code == 200
    assert response.json()["memory"]["status"] == "rejected"
    # The reason is optional, and so is the body.
    assert web.send("POST", f"/api/memories/{second.id}/reject").status_code == 200
    assert web.list(status="pending") == [] and web.list() == []
    reasons = [
        e.payload["reason"]
        for e in facade.events.list(session_id="chat-1")
        if e.type == "MemoryRejected"
    ]
    assert reasons == ["not a convention", "rejected by the user"]
    assert web.send("POST", f"/api/memories/{first.id}/reject").status_code == 409
    assert web.send("POST", f"/api/memories/{first.id}/approve").status_code == 409


def test_approving_an_approved_memory_is_409(web, facade):
    record = facade.memory.set("user", "k", "v", workspace_id=facade.workspace_id)
    for verb in ("approve", "reject"):
        response = web.send("POST", f"/api/memories/{record.id}/{verb}")
        assert response.status_code == 409
    assert facade.memory.store.get(record.id).status == "approved"


def test_reject_reason_must_be_a_string(web, propose):
    proposal = propose(PROPOSALS).pending[0]
    response = web.send("POST", f"/api/memories/{proposal.id}/reject", {"reason": 5})
    assert response.status_code == 400
    assert web.list(status="pending")[0]["id"] == proposal.id


# -- editing and forgetting ----------------------------------------------------------------


def test_edit_replaces_the_body_of_an_approved_memory(web, facade, propose):
    ws = facade.workspace_id
    user = facade.memory.set("user", "editor.font", "Fira", workspace_id=ws)
    workspace = facade.memory.set("workspace", "test.cmd", "make test", workspace_id=ws)
    [session] = propose('<memory scope="session">Explain first.</memory>').accepted
    for record, body in (
        (user, "Fira Code 14"),
        (workspace, "make check"),
        (session, "Code first."),
    ):
        response = web.send("PUT", f"/api/memories/{record.id}", {"body": body})
        assert response.status_code == 200, response.text
        assert response.json()["memory"]["id"] == record.id
        assert facade.memory.store.get(record.id).body == body


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"body": "  "}, 400, "empty"),
        ({}, 400, "missing field 'body'"),
        ({"body": ["x"]}, 400, "must be a string"),
    ],
)
def test_edit_rejects_bad_input(web, facade, body, status, message):
    record = facade.memory.set("user", "k", "v", workspace_id=facade.workspace_id)
    response = web.send("PUT", f"/api/memories/{record.id}", body)
    assert response.status_code == status
    assert message in response.json()["error"]
    assert facade.memory.store.get(record.id).body == "v"


def test_a_proposal_is_decided_not_edited_or_forgotten(web, facade, propose):
    proposal = propose(PROPOSALS).pending[0]
    assert web.send("PUT", f"/api/memories/{proposal.id}", {"body": "x"}).status_code == 409
    refused = web.send("DELETE", f"/api/memories/{proposal.id}")
    assert refused.status_code == 409 and "reject it instead" in refused.json()["error"]
    assert facade.memory.store.get(proposal.id).body == "Conventional Commits."


def test_forget_deletes(web, facade, propose):
    ws = facade.workspace_id
    user = facade.memory.set("user", "editor.font", "Fira", workspace_id=ws)
    [session] = propose('<memory scope="session">Explain first.</memory>').accepted
    for record in (user, session):
        response = web.send("DELETE", f"/api/memories/{record.id}")
        assert response.status_code == 200
        assert response.json()["memory"]["id"] == record.id
        assert facade.memory.store.get(record.id) is None
        assert web.send("DELETE", f"/api/memories/{record.id}").status_code == 404


def test_every_change_goes_through_the_approval_flow_and_is_an_event_by_web(web, facade, propose):
    ws = facade.workspace_id
    created = web.send("POST", "/api/memories", {"scope": "user", "key": "k", "body": "one"})
    record_id = created.json()["memory"]["id"]
    web.send("PUT", f"/api/memories/{record_id}", {"body": "two"})
    [session] = propose('<memory scope="session">Explain first.</memory>').accepted
    web.send("PUT", f"/api/memories/{session.id}", {"body": "Code first."})
    web.send("DELETE", f"/api/memories/{session.id}")
    [pending] = propose('<memory scope="workspace" key="w">x</memory>').pending
    web.send("POST", f"/api/memories/{pending.id}/approve")
    decided = [
        (e.type, e.payload.get("actor"), e.payload.get("previous_body"))
        for e in facade.events.list()
        if e.type in ("MemoryAccepted", "MemoryEdited", "MemoryForgotten")
        and not e.payload.get("auto")
    ]
    assert decided == [
        ("MemoryAccepted", "web", None),
        ("MemoryEdited", "web", "one"),
        ("MemoryEdited", "web", "Explain first."),
        ("MemoryForgotten", "web", "Code first."),
        ("MemoryAccepted", "web", None),
    ]
    assert facade.memory.find("w", workspace_id=ws).body == "x"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/memories/{id}/approve", None),
        ("POST", "/api/memories/{id}/reject", None),
        ("PUT", "/api/memories/{id}", {"body": "x"}),
        ("DELETE", "/api/memories/{id}", None),
    ],
)
def test_unknown_ids_and_other_workspaces_are_404(web, facade, method, path, body):
    elsewhere = AppFacade(cwd=facade.workspace_root).memory.store.propose(
        "workspace", "secret", key="k", workspace_id="/other/workspace"
    )
    for memory_id in (9999, elsewhere.id, 99999999999999999999999, 2**63):
        response = web.send(method, path.format(id=memory_id), body)
        assert response.status_code == 404
        assert "error" in response.json()
    assert facade.memory.store.get(elsewhere.id).status == "pending"
    not_a_number = web.send(method, path.format(id="abc"), body)
    assert not_a_number.status_code in (404, 405)


# -- the page ------------------------------------------------------------------------------


def test_the_page_and_its_assets(web, facade):
    page = web.client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert str(facade.workspace_root) in page.text
    assert 'src="/static/app.js"' in page.text and 'href="/static/style.css"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    script = web.client.get("/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "textContent" in script.text and "innerHTML" not in script.text
    style = web.client.get("/static/style.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    # No external CDN: everything the page loads comes from this server.
    assert "http://" not in page.text and "https://" not in page.text
    assert web.client.get("/static/index.html").status_code == 404


def test_the_workspace_path_is_escaped_in_the_page(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from kairox.web import create_app

    odd = tmp_path / 'ws<script>"'
    odd.mkdir()
    facade = AppFacade(cwd=odd)
    app = create_app(lambda: facade, token=None, allowed_origin="http://testserver")
    text = TestClient(app).get("/").text
    assert "ws<script>" not in text and "ws&lt;script&gt;&quot;" in text


def test_static_files_ship_inside_the_package():
    from importlib import resources

    static = resources.files("kairox.web") / "static"
    assert {"index.html", "app.js", "style.css"} <= {p.name for p in static.iterdir()}


# -- a key's earlier values, over a real socket ----------------------------------------------


def test_history_of_a_memory_over_a_real_socket(workspace, facade, serve_in_thread):
    import httpx

    from kairox.web import bind_socket

    ws = facade.workspace_id
    for body in ("Mono 12", "Mono 14", "Fira 13"):
        current = facade.memory.set("user", "editor.font", body, workspace_id=ws)
    plain = facade.memory.set("workspace", "test.cmd", "make test", workspace_id=ws)
    elsewhere = facade.memory.set("workspace", "test.cmd", "tox", workspace_id="/other/ws")
    facade.memory.set("workspace", "test.cmd", "nox", workspace_id="/other/ws")
    proposal = facade.memory.propose(
        "user", "Iosevka", key="editor.font", by=Proposer("chat-1", ws, "api")
    ).pending[0]

    sock = bind_socket("127.0.0.1", 0)
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = create_app(lambda: AppFacade(cwd=workspace), token=None, allowed_origin=origin)
    with serve_in_thread(app, sock), httpx.Client(base_url=origin, timeout=30) as client:
        listed = client.get("/api/memories").json()["memories"]
        assert [(m["key"], m["body"], m["earlier_values"]) for m in listed] == [
            ("editor.font", "Fira 13", 2),
            ("test.cmd", "make test", 0),
        ]
        response = client.get(f"/api/memories/{current.id}/history")
        assert response.status_code == 200
        history = response.json()["history"]
        assert [(h["body"], h["status"]) for h in history] == [
            ("Mono 12", "superseded"),
            ("Mono 14", "superseded"),
            ("Fira 13", "approved"),
        ]
        assert history[0]["valid_to"] == history[1]["valid_from"]
        assert history[1]["valid_to"] == history[2]["valid_from"]
        assert history[2]["id"] == current.id and history[2]["valid_to"] is None
        # An earlier value's id leads to the same history.
        again = client.get(f"/api/memories/{history[0]['id']}/history").json()["history"]
        assert [h["id"] for h in again] == [h["id"] for h in history]
        assert [
            h["body"] for h in client.get(f"/api/memories/{plain.id}/history").json()["history"]
        ] == ["make test"]
        # Another workspace's history is not this page's; a proposal has none yet.
        assert client.get(f"/api/memories/{elsewhere.id}/history").status_code == 404
        waiting = client.get(f"/api/memories/{proposal.id}/history")
        assert waiting.status_code == 409 and "pending" in waiting.json()["error"]
        # The page offers the history of a memory that has one.
        assert "History (" in client.get("/static/app.js").text


def test_a_body_over_the_bound_is_a_400_naming_the_setting(workspace):
    (workspace / "kairox.toml").write_text("[memory]\nmax_body_chars = 50\n")
    fresh = create_app(lambda: AppFacade(cwd=workspace), token=None, allowed_origin=ORIGIN)
    with TestClient(fresh) as client:
        headers = {"Origin": ORIGIN, CSRF_HEADER: csrf_token_of(client.get("/").text)}
        refused = client.post(
            "/api/memories",
            json={"scope": "user", "key": "k", "body": "x" * 51},
            headers=headers,
        )
        assert refused.status_code == 400
        assert "(at most 50, [memory] max_body_chars)" in refused.json()["error"]
        kept = client.post(
            "/api/memories", json={"scope": "user", "key": "k", "body": "x" * 50}, headers=headers
        )
        assert kept.status_code == 200
        memory_id = kept.json()["memory"]["id"]
        edited = client.put(f"/api/memories/{memory_id}", json={"body": "y" * 51}, headers=headers)
        assert edited.status_code == 400 and "max_body_chars" in edited.json()["error"]
