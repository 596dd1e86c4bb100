"""Tests for the scoped SQLite memory store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kairox.memory import MEMORY_SCHEMA_VERSION, MemoryStore, SqliteMemoryStore
from kairox.store.events import SchemaVersionError, SqliteEventStore, UserMessageAdded
from tests.conftest import set_schema_version


class Clock:
    """A clock that moves one second per reading, so timestamps always differ."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kairox.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(db, clock=Clock()) as memory_store:
        yield memory_store


def test_implements_the_protocol(store: SqliteMemoryStore) -> None:
    assert isinstance(store, MemoryStore)


def test_put_and_get(store: SqliteMemoryStore) -> None:
    record = store.put("user", "  JetBrains Mono 14px.  ", key="editor.font")
    assert record.id > 0
    assert (record.scope, record.key, record.body, record.status) == (
        "user",
        "editor.font",
        "JetBrains Mono 14px.",
        "approved",
    )
    assert record.created_at == record.updated_at
    assert record.approved_at is not None
    assert datetime.fromisoformat(record.created_at).utcoffset() == timedelta(0)
    assert store.get(record.id) == record
    assert store.get(record.id + 1000) is None


def test_session_memories_have_no_approved_at(store: SqliteMemoryStore) -> None:
    record = store.put("session", "Prefers explanations first.", session_id="s1")
    assert record.status == "approved"
    assert record.approved_at is None
    assert record.key is None


def test_same_key_overwrites_and_keeps_created_at(store: SqliteMemoryStore) -> None:
    first = store.put("user", "Mono 12", key="editor.font")
    second = store.put("user", "Mono 14", key="  Editor Font ")
    assert second.id == first.id
    assert second.body == "Mono 14"
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert [r.body for r in store.list(scope="user")] == ["Mono 14"]
    by_key = store.get_by_key("user", "EDITOR.FONT")
    assert by_key is not None and by_key.id == first.id


def test_different_keys_do_not_overwrite(store: SqliteMemoryStore) -> None:
    store.put("user", "a", key="font-preference")
    store.put("user", "b", key="font-preference-2026")
    assert sorted(r.key or "" for r in store.list(scope="user")) == [
        "font-preference",
        "font-preference-2026",
    ]


def test_session_memories_without_key_accumulate_and_with_key_overwrite(
    store: SqliteMemoryStore,
) -> None:
    store.put("session", "one", session_id="s1")
    store.put("session", "two", session_id="s1")
    a = store.put("session", "task v1", key="task", session_id="s1")
    b = store.put("session", "task v2", key="task", session_id="s1")
    other = store.put("session", "task elsewhere", key="task", session_id="s2")
    assert a.id == b.id != other.id
    assert [r.body for r in store.list(session_id="s1")] == ["one", "two", "task v2"]


def test_workspace_key_is_per_workspace(store: SqliteMemoryStore) -> None:
    one = store.put("workspace", "Conventional Commits", key="commit.style", workspace_id="/ws/one")
    two = store.put("workspace", "Gitmoji", key="commit.style", workspace_id="/ws/two")
    assert one.id != two.id
    again = store.put(
        "workspace", "Conventional Commits v2", key="commit.style", workspace_id="/ws/one"
    )
    assert again.id == one.id
    assert [r.body for r in store.list(workspace_id="/ws/one")] == ["Conventional Commits v2"]
    assert [r.body for r in store.list(workspace_id="/ws/two")] == ["Gitmoji"]
    found = store.get_by_key("workspace", "commit.style", workspace_id="/ws/two")
    assert found is not None and found.body == "Gitmoji"


def test_isolation_across_workspaces_and_sessions(store: SqliteMemoryStore) -> None:
    store.put("user", "Mono", key="editor.font", workspace_id="/ws/one", session_id="s1")
    store.put("workspace", "uses uv", key="tooling", workspace_id="/ws/one")
    store.put("workspace", "uses poetry", key="tooling", workspace_id="/ws/two")
    store.put("session", "debugging the parser", session_id="s1", workspace_id="/ws/one")
    store.put("session", "writing docs", session_id="s2", workspace_id="/ws/one")
    store.put("session", "other project", session_id="s3", workspace_id="/ws/two")

    seen = {r.body for r in store.visible_to("/ws/one", "s1")}
    assert seen == {"Mono", "uses uv", "debugging the parser"}
    seen = {r.body for r in store.visible_to("/ws/one", "s2")}
    assert seen == {"Mono", "uses uv", "writing docs"}
    seen = {r.body for r in store.visible_to("/ws/two", "s3")}
    assert seen == {"Mono", "uses poetry", "other project"}
    # A new session in a new workspace still has the user's memories, and nothing else.
    assert {r.body for r in store.visible_to("/ws/three", "s9")} == {"Mono"}
    assert {r.body for r in store.visible_to("/ws/one")} == {"Mono", "uses uv"}

    listed = store.list(workspace_id="/ws/two")
    assert {r.body for r in listed} == {"uses poetry", "other project"}
    assert all(r.workspace_id == "/ws/two" for r in listed)
    assert [r.body for r in store.list(session_id="s2")] == ["writing docs"]


def test_user_memory_is_not_bound_to_the_proposing_workspace(store: SqliteMemoryStore) -> None:
    record = store.put("user", "Mono", key="editor.font", workspace_id="/ws/one", session_id="s1")
    assert (record.workspace_id, record.session_id) == (None, None)
    assert record.provenance["workspace_id"] == "/ws/one"
    assert record.provenance["session_id"] == "s1"
    workspace = store.put("workspace", "x", key="k", workspace_id="/ws/one", session_id="s1")
    assert workspace.session_id is None
    assert workspace.provenance["session_id"] == "s1"


def test_pending_proposals_wait_and_survive_a_restart(db: Path) -> None:
    with SqliteMemoryStore(db) as store:
        proposal = store.propose(
            "user",
            "Prefers TypeScript",
            key="lang.preference",
            session_id="s1",
            provenance={"event_id": 42, "injection_warning": True},
        )
        assert proposal.status == "pending"
        assert proposal.approved_at is None
        assert store.list() == []
        assert store.visible_to("/ws", "s1") == []
    with SqliteMemoryStore(db) as reopened:
        (pending,) = reopened.list(status="pending")
        assert pending == proposal
        assert pending.injection_warning is True
        assert pending.provenance["event_id"] == 42
        assert pending.provenance["session_id"] == "s1"
        approved = reopened.set_status(pending.id, "approved")
        assert approved.status == "approved" and approved.approved_at is not None
        assert [r.body for r in reopened.visible_to("/ws", "s2")] == ["Prefers TypeScript"]


def test_a_proposal_does_not_touch_the_approved_memory_until_approved(
    store: SqliteMemoryStore,
) -> None:
    current = store.put("user", "Mono 12", key="editor.font")
    proposal = store.propose("user", "Mono 14", key="editor.font", session_id="s1")
    assert proposal.id != current.id
    assert store.get_by_key("user", "editor.font").body == "Mono 12"  # type: ignore[union-attr]
    pending = store.get_by_key("user", "editor.font", status="pending")
    assert pending is not None and pending.id == proposal.id

    merged = store.set_status(proposal.id, "approved")
    assert merged.id == current.id
    assert merged.body == "Mono 14"
    assert merged.created_at == current.created_at
    assert merged.updated_at > current.updated_at
    assert merged.approved_at is not None and merged.approved_at > current.approved_at  # type: ignore[operator]
    assert store.get(proposal.id) is None  # the proposal was consumed
    assert [(r.body, r.status) for r in store.list(status=None)] == [
        ("Mono 14", "approved"),
        ("Mono 12", "superseded"),
    ]


def test_a_new_proposal_replaces_a_pending_one_with_the_same_key(store: SqliteMemoryStore) -> None:
    first = store.propose("workspace", "tabs", key="indent", workspace_id="/ws")
    second = store.propose("workspace", "spaces", key="indent", workspace_id="/ws")
    assert second.id == first.id
    assert [r.body for r in store.list(status="pending")] == ["spaces"]


def test_rejecting_a_proposal(store: SqliteMemoryStore) -> None:
    proposal = store.propose("workspace", "tabs", key="indent", workspace_id="/ws")
    rejected = store.set_status(proposal.id, "rejected")
    assert rejected.status == "rejected"
    assert store.list(workspace_id="/ws") == []
    assert store.list(status="pending") == []
    assert [r.id for r in store.list(status="rejected")] == [proposal.id]
    assert store.visible_to("/ws") == []
    # A later proposal with the same key is a fresh pending record.
    again = store.propose("workspace", "tabs again", key="indent", workspace_id="/ws")
    assert again.id != proposal.id and again.status == "pending"


def test_set_status_validation(store: SqliteMemoryStore) -> None:
    record = store.propose("session", "x", session_id="s1")
    with pytest.raises(ValueError, match="back to pending"):
        store.set_status(record.id, "pending")
    with pytest.raises(ValueError, match="unknown memory status 'maybe'"):
        store.set_status(record.id, "maybe")
    with pytest.raises(KeyError, match="no memory with id 999"):
        store.set_status(999, "approved")
    approved = store.set_status(record.id, "approved")
    assert approved.status == "approved"
    assert approved.approved_at is not None  # a person decided, whatever the scope
    assert store.set_status(record.id, "approved") == approved  # idempotent


def test_update_body(store: SqliteMemoryStore) -> None:
    record = store.put("user", "Mono 12", key="editor.font")
    edited = store.update_body(record.id, " Mono 13 ")
    assert edited.body == "Mono 13"
    assert edited.updated_at > record.updated_at
    assert edited.created_at == record.created_at
    with pytest.raises(ValueError, match="must not be empty"):
        store.update_body(record.id, "   ")
    with pytest.raises(KeyError):
        store.update_body(999, "x")
    assert store.get(record.id).body == "Mono 13"  # type: ignore[union-attr]


def test_forget(store: SqliteMemoryStore) -> None:
    record = store.put("user", "Mono", key="editor.font")
    assert store.forget(record.id) is True
    assert store.get(record.id) is None
    assert store.get_by_key("user", "editor.font") is None
    assert store.forget(record.id) is False


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"scope": "global", "body": "x", "key": "k"}, ValueError, "unknown memory scope 'global'"),
        ({"scope": "user", "body": "x"}, ValueError, "user memory needs a key"),
        ({"scope": "user", "body": "x", "key": "  "}, ValueError, "user memory needs a key"),
        ({"scope": "workspace", "body": "x", "workspace_id": "/w"}, ValueError, "needs a key"),
        ({"scope": "workspace", "body": "x", "key": "k"}, ValueError, "needs a workspace_id"),
        ({"scope": "session", "body": "x"}, ValueError, "needs a session_id"),
        ({"scope": "user", "body": "", "key": "k"}, ValueError, "must not be empty"),
        ({"scope": "user", "body": " \n\t", "key": "k"}, ValueError, "must not be empty"),
        ({"scope": "user", "body": None, "key": "k"}, TypeError, "must be a string"),
        ({"scope": "user", "body": "x", "key": "a/b"}, ValueError, "invalid memory key"),
        ({"scope": "user", "body": "x", "key": "k" * 129}, ValueError, "at most 128"),
        (
            {"scope": "user", "body": "x", "key": "k", "provenance": {"when": object()}},
            TypeError,
            "not JSON-serialisable",
        ),
    ],
)
@pytest.mark.parametrize("method", ["put", "propose"])
def test_validation_errors(
    store: SqliteMemoryStore, method: str, kwargs: dict, error: type, fragment: str
) -> None:
    args = dict(kwargs)
    scope, body = args.pop("scope"), args.pop("body")
    with pytest.raises(error, match=fragment):
        getattr(store, method)(scope, body, **args)
    assert store.list(status=None) == []


def test_query_validation(store: SqliteMemoryStore) -> None:
    with pytest.raises(ValueError, match="unknown memory scope"):
        store.list(scope="team")
    with pytest.raises(ValueError, match="unknown memory status"):
        store.list(status="done")
    with pytest.raises(ValueError, match="needs a workspace_id"):
        store.get_by_key("workspace", "k")
    with pytest.raises(ValueError, match="visible_to"):
        store.visible_to("")


def test_database_constraints_back_up_the_validation(store: SqliteMemoryStore, db: Path) -> None:
    raw = sqlite3.connect(db)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            raw.execute(
                "INSERT INTO memories(scope, key, body, status, created_at, updated_at)"
                " VALUES ('workspace', 'k', 'x', 'approved', 't', 't')"
            )
        with pytest.raises(sqlite3.IntegrityError):
            raw.execute(
                "INSERT INTO memories(scope, body, status, created_at, updated_at)"
                " VALUES ('user', 'x', 'approved', 't', 't')"
            )
        raw.execute(
            "INSERT INTO memories(scope, key, body, status, created_at, updated_at)"
            " VALUES ('user', 'k', 'x', 'approved', 't', 't')"
        )
        with pytest.raises(sqlite3.IntegrityError):  # a second live record for the key
            raw.execute(
                "INSERT INTO memories(scope, key, body, status, created_at, updated_at)"
                " VALUES ('user', 'k', 'y', 'approved', 't', 't')"
            )
    finally:
        raw.close()


def test_two_store_objects_see_each_others_writes(db: Path) -> None:
    with SqliteMemoryStore(db) as tui, SqliteMemoryStore(db) as gui:
        record = tui.put("workspace", "uses uv", key="tooling", workspace_id="/ws")
        assert [r.body for r in gui.visible_to("/ws")] == ["uses uv"]
        gui.update_body(record.id, "uses uv and ruff")
        assert [r.body for r in tui.visible_to("/ws")] == ["uses uv and ruff"]
        proposal = gui.propose("user", "Mono", key="editor.font")
        assert tui.set_status(proposal.id, "approved").body == "Mono"
        assert gui.get_by_key("user", "editor.font") is not None


def test_shares_the_event_store_database(db: Path) -> None:
    with SqliteEventStore(db) as events, SqliteMemoryStore(db) as memories:
        event = events.append("s1", "/ws", UserMessageAdded(text="hi"))
        record = memories.put("session", "x", session_id="s1")
        assert events.get(event.id) is not None and memories.get(record.id) is not None
    raw = sqlite3.connect(db)
    try:
        tables = {
            row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        components = dict(raw.execute("SELECT component, version FROM kairox_schema"))
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    assert {"events", "memories", "kairox_schema"} <= tables
    assert components == {"events": 1, "memory": MEMORY_SCHEMA_VERSION}


def test_newer_memory_schema_is_refused(db: Path) -> None:
    SqliteMemoryStore(db).close()
    set_schema_version(db, "memory", 7)
    with pytest.raises(SchemaVersionError, match="'memory' tables"):
        SqliteMemoryStore(db)
    # The event store's own component is unaffected by the memory tables' version.
    SqliteEventStore(db).close()


# -- memories that change over time ---------------------------------------------------------

V1_DATABASE = Path(__file__).parent / "data" / "memory_v1.sql"


def test_a_new_value_supersedes_the_old_one_which_stays_with_its_interval(
    store: SqliteMemoryStore,
) -> None:
    first = store.put("user", "Mono 12", key="editor.font")
    second = store.put("user", "Mono 14", key="editor.font")
    third = store.put("user", "Fira 13", key="editor.font")
    assert first.id == second.id == third.id  # the memory keeps its id
    history = store.history("user", "Editor Font")
    assert [(r.body, r.status) for r in history] == [
        ("Mono 12", "superseded"),
        ("Mono 14", "superseded"),
        ("Fira 13", "approved"),
    ]
    old, middle, current = history
    # Each value was valid from when it was written until the next one replaced it.
    assert old.valid_from == first.valid_from and old.valid_to == second.valid_from
    assert middle.valid_from == second.valid_from and middle.valid_to == current.valid_from
    assert current.valid_to is None and current.id == first.id
    assert old.valid_from < old.valid_to < middle.valid_to  # type: ignore[operator]
    # Only the current value is listed, looked up and visible to a session.
    assert [r.body for r in store.list(scope="user")] == ["Fira 13"]
    assert store.get_by_key("user", "editor.font").body == "Fira 13"  # type: ignore[union-attr]
    assert [r.body for r in store.visible_to("/ws", "s1")] == ["Fira 13"]


def test_the_same_body_again_is_no_new_value(store: SqliteMemoryStore) -> None:
    store.put("workspace", "make test", key="test.cmd", workspace_id="/ws")
    store.put("workspace", "make test", key="test.cmd", workspace_id="/ws")
    assert [r.status for r in store.history("workspace", "test.cmd", "/ws")] == ["approved"]


def test_approving_and_editing_keep_the_earlier_value(store: SqliteMemoryStore) -> None:
    current = store.put("workspace", "tabs", key="indent", workspace_id="/ws")
    proposal = store.propose("workspace", "spaces", key="indent", workspace_id="/ws")
    store.update_body(proposal.id, "4 spaces")  # a pending body is no value yet: no history
    assert [r.body for r in store.history("workspace", "indent", "/ws")] == ["tabs"]
    store.set_status(proposal.id, "approved")
    store.update_body(current.id, "2 spaces")
    assert [(r.body, r.status) for r in store.history("workspace", "indent", "/ws")] == [
        ("tabs", "superseded"),
        ("4 spaces", "superseded"),
        ("2 spaces", "approved"),
    ]
    # Another workspace's key of the same name has its own history.
    store.put("workspace", "tabs", key="indent", workspace_id="/other")
    assert len(store.history("workspace", "indent", "/other")) == 1


def test_superseded_records_cannot_be_decided_and_forgetting_takes_the_history(
    store: SqliteMemoryStore,
) -> None:
    current = store.put("user", "one", key="k")
    store.put("user", "two", key="k")
    [old] = store.list(status="superseded")
    with pytest.raises(ValueError, match="history"):
        store.set_status(old.id, "approved")
    with pytest.raises(ValueError, match="not by hand"):
        store.set_status(current.id, "superseded")
    assert store.forget(current.id)
    assert store.list(status=None) == []
    assert store.history("user", "k") == []


def test_a_version_1_database_is_upgraded_with_every_memory_kept(db: Path) -> None:
    raw = sqlite3.connect(db)
    raw.executescript(V1_DATABASE.read_text())
    raw.close()

    with SqliteMemoryStore(db, clock=Clock()) as store:
        records = {r.id: r for r in store.list(status=None)}
        assert {i: (r.scope, r.key, r.body, r.status) for i, r in records.items()} == {
            1: ("user", "editor.font", "JetBrains Mono 14px.", "approved"),
            2: ("workspace", "test.command", "make test", "approved"),
            3: ("user", "editor.font", "Fira Code 13px.", "pending"),
            4: ("user", "tone", "Be chatty.", "rejected"),
            5: ("session", None, "Explain first.", "approved"),
        }
        font = records[1]
        assert font.created_at == "2026-01-01T10:00:00.000000+00:00"
        assert font.provenance == {"written_by": "user", "actor": "cli"}
        # An approved body has been current since it was last written.
        assert font.valid_from == font.updated_at and font.valid_to is None
        assert records[3].valid_from is None and records[4].valid_from is None

        # The upgraded table takes the new behaviour: approving the old proposal keeps history.
        approved = store.set_status(3, "approved")
        assert approved.id == 1 and approved.body == "Fira Code 13px."
        assert [(r.body, r.valid_to is not None) for r in store.history("user", "editor.font")] == [
            ("JetBrains Mono 14px.", True),
            ("Fira Code 13px.", False),
        ]
        # Ids are never reused: memory 6 was forgotten before the upgrade.
        assert store.put("user", "Short.", key="tone").id > 6
    raw = sqlite3.connect(db)
    try:
        version = raw.execute(
            "SELECT version FROM kairox_schema WHERE component = 'memory'"
        ).fetchone()[0]
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        raw.close()
    assert version == MEMORY_SCHEMA_VERSION == 2
    assert "memories_v1" not in tables
