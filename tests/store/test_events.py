"""Tests for the typed events and the append-only SQLite event store."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kairox.store.events import (
    DATABASE_FORMAT_VERSION,
    EVENT_TYPES,
    AssistantMessageCompleted,
    CompactionSummary,
    ContextAssembled,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    Event,
    MemoryAccepted,
    MemoryProposed,
    MemoryRejected,
    ModelTokenDelta,
    ProfileSwitched,
    SchemaVersionError,
    SqliteEventStore,
    ToolInvocationCompleted,
    UserMessageAdded,
    connect_database,
)
from tests.conftest import set_schema_version

CORE = Path(__file__).resolve().parents[2] / "core"

ONE_OF_EACH: list[Event] = [
    UserMessageAdded(text="Hello, 世界", turn_id="t1"),
    ModelTokenDelta(text="Hel", turn_id="t1"),
    AssistantMessageCompleted(text="Hello!", turn_id="t1", model="gpt-4o", profile="default"),
    ToolInvocationCompleted(
        tool="grep", arguments={"pattern": "x", "paths": ["a", "b"]}, output="a:1", call_id="c1"
    ),
    MemoryProposed(
        scope="user", key="editor.font", body="Mono", memory_id=3, injection_warning=True
    ),
    MemoryAccepted(scope="session", memory_id=4, auto=True),
    MemoryRejected(reason="unknown scope 'global'", raw='<memory scope="global">x</memory>'),
    ContextCompactionStarted(trigger="manual", tokens_before=9000),
    CompactionSummary(
        summary="goal: ...", first_event_id=1, last_event_id=40, summarizer="extractive"
    ),
    ContextCompactionCompleted(summary_event_id=41, tokens_before=9000, tokens_after=1200),
    ContextCompactionFailed(error="model timed out", summarizer="llm"),
    ContextCompactionSkipped(reason="history already fits"),
    ProfileSwitched(to_profile="smart", from_profile="default"),
    ContextAssembled(
        trace={"sources": [{"name": "memory:user", "tokens": 12}], "dropped": []},
        total_tokens=120,
        budget=4000,
    ),
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "kairox.db"


@pytest.fixture
def store(db: Path):
    with SqliteEventStore(db) as event_store:
        yield event_store


def test_every_event_type_is_registered_and_covered() -> None:
    expected = {
        "UserMessageAdded", "ModelTokenDelta", "AssistantMessageCompleted",
        "ToolInvocationCompleted", "MemoryProposed", "MemoryAccepted", "MemoryRejected",
        "ContextCompactionStarted", "CompactionSummary", "ContextCompactionCompleted",
        "ContextCompactionFailed", "ContextCompactionSkipped", "ProfileSwitched",
        "ContextAssembled",
    }  # fmt: skip
    assert expected <= set(EVENT_TYPES)
    assert {event.type for event in ONE_OF_EACH} == expected
    assert all(EVENT_TYPES[name].type == name for name in expected)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.type)
def test_every_event_round_trips(store: SqliteEventStore, event: Event) -> None:
    stored = store.append("s1", "/work/ws", event)
    again = store.get(stored.id)
    assert again == stored
    assert again is not None
    assert again.type == event.type
    assert again.event == event
    assert again.session_id == "s1" and again.workspace_id == "/work/ws"


def test_append_assigns_increasing_ids_and_utc_timestamps(store: SqliteEventStore) -> None:
    before = datetime.now(UTC)
    first = store.append("s1", "w", UserMessageAdded(text="a"))
    second = store.append("s1", "w", ModelTokenDelta(text="b"))
    after = datetime.now(UTC)
    assert second.id > first.id
    created = datetime.fromisoformat(first.created_at)
    assert created.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= created <= after + timedelta(seconds=1)
    assert first.payload == {"text": "a", "turn_id": None, "name": None, "time": None}


def test_list_filters_and_orders(store: SqliteEventStore) -> None:
    ids = [
        store.append("s1", "w1", UserMessageAdded(text="1")).id,
        store.append("s2", "w1", UserMessageAdded(text="2")).id,
        store.append("s1", "w1", ModelTokenDelta(text="3")).id,
        store.append("s1", "w2", AssistantMessageCompleted(text="4")).id,
        store.append("s1", "w1", UserMessageAdded(text="5")).id,
    ]
    assert [e.id for e in store.list()] == ids
    assert [e.payload["text"] for e in store.list(session_id="s1")] == ["1", "3", "4", "5"]
    assert [e.payload["text"] for e in store.list(types=["UserMessageAdded"])] == ["1", "2", "5"]
    assert [
        e.payload["text"] for e in store.list(types=[ModelTokenDelta, "AssistantMessageCompleted"])
    ] == [
        "3",
        "4",
    ]
    assert [e.payload["text"] for e in store.list(session_id="s1", after_id=ids[2])] == ["4", "5"]
    assert [e.payload["text"] for e in store.list(session_id="s1", limit=2)] == ["1", "3"]
    assert [e.payload["text"] for e in store.list(workspace_id="w2")] == ["4"]
    assert store.list(types=[]) == []
    assert store.list(session_id="nobody") == []
    with pytest.raises(ValueError, match="limit"):
        store.list(limit=-1)


def test_get_missing_is_none(store: SqliteEventStore) -> None:
    assert store.get(12345) is None


def test_compaction_summary_records_provenance(store: SqliteEventStore) -> None:
    stored = store.append(
        "s1",
        "w",
        CompactionSummary(summary="...", first_event_id=3, last_event_id=17, summarizer="llm"),
        provenance={"model": "gpt-4o"},
    )
    again = store.get(stored.id)
    assert again is not None
    assert again.provenance == {
        "first_event_id": 3,
        "last_event_id": 17,
        "summarizer": "llm",
        "model": "gpt-4o",
    }
    plain = store.append("s1", "w", UserMessageAdded(text="x"))
    assert store.get(plain.id).provenance is None  # type: ignore[union-attr]


def test_compaction_summary_range_must_not_be_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        CompactionSummary(summary="x", first_event_id=9, last_event_id=2, summarizer="s")


def test_unserialisable_payload_names_the_event_type(store: SqliteEventStore) -> None:
    with pytest.raises(TypeError, match=r"ToolInvocationCompleted.*not JSON-serialisable"):
        store.append("s1", "w", ToolInvocationCompleted(tool="t", arguments={"when": object()}))
    with pytest.raises(TypeError, match=r"ContextAssembled.*not JSON-serialisable"):
        store.append("s1", "w", ContextAssembled(trace={"score": float("nan")}))
    with pytest.raises(TypeError, match="provenance of UserMessageAdded"):
        store.append("s1", "w", UserMessageAdded(text="x"), provenance={"bad": {1, 2}})
    assert store.list() == []  # nothing half-written


def test_append_validates_its_arguments(store: SqliteEventStore) -> None:
    with pytest.raises(TypeError, match="Event subclass"):
        store.append("s1", "w", {"type": "UserMessageAdded"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session_id"):
        store.append("", "w", UserMessageAdded(text="x"))


def test_unknown_stored_type_is_a_clear_error(store: SqliteEventStore, db: Path) -> None:
    with sqlite3.connect(db) as raw:
        raw.execute(
            "INSERT INTO events(session_id, workspace_id, created_at, type, payload)"
            " VALUES ('s', 'w', '2024-01-01T00:00:00+00:00', 'FromTheFuture', '{}')"
        )
    (stored,) = store.list()
    assert stored.type == "FromTheFuture"
    with pytest.raises(ValueError, match="unknown event type 'FromTheFuture'"):
        _ = stored.event


def test_there_is_no_update_or_delete_api(store: SqliteEventStore) -> None:
    for name in ("update", "delete", "remove", "clear", "truncate"):
        assert not hasattr(store, name)


def test_triggers_block_update_and_delete(store: SqliteEventStore, db: Path) -> None:
    stored = store.append("s1", "w", UserMessageAdded(text="original"))
    raw = sqlite3.connect(db)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only: UPDATE"):
            raw.execute("UPDATE events SET payload = '{}' WHERE id = ?", (stored.id,))
        with pytest.raises(sqlite3.DatabaseError, match="append-only: DELETE"):
            raw.execute("DELETE FROM events")
    finally:
        raw.close()
    again = store.get(stored.id)
    assert again is not None and again.payload["text"] == "original"


def test_wal_mode_and_busy_timeout(store: SqliteEventStore, db: Path) -> None:
    store.append("s1", "w", UserMessageAdded(text="x"))
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == DATABASE_FORMAT_VERSION
    finally:
        raw.close()
    conn = connect_database(db, busy_timeout_ms=1234)
    try:
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234
    finally:
        conn.close()


def test_two_stores_on_one_file_see_each_others_writes(db: Path) -> None:
    with SqliteEventStore(db) as a, SqliteEventStore(db) as b:
        first = a.append("s1", "w", UserMessageAdded(text="from a"))
        assert [e.id for e in b.list()] == [first.id]
        second = b.append("s1", "w", UserMessageAdded(text="from b"))
        assert [e.payload["text"] for e in a.list()] == ["from a", "from b"]
        assert a.get(second.id) == second


def test_two_processes_append_concurrently(db: Path) -> None:
    SqliteEventStore(db).close()  # create the schema first, as the app would
    script = textwrap.dedent(
        """
        import sys
        from kairox.store.events import SqliteEventStore, UserMessageAdded
        store = SqliteEventStore(sys.argv[1])
        for i in range(150):
            store.append(sys.argv[2], "w", UserMessageAdded(text=str(i)))
        store.close()
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(CORE), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(db), name], env=env)
        for name in ("proc-a", "proc-b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with SqliteEventStore(db) as store:
        events = store.list()
        assert len(events) == 300
        assert len({e.id for e in events}) == 300
        for name in ("proc-a", "proc-b"):
            texts = [e.payload["text"] for e in store.list(session_id=name)]
            assert texts == [str(i) for i in range(150)]


def test_reopening_keeps_events(db: Path) -> None:
    with SqliteEventStore(db) as store:
        stored = store.append("s1", "w", UserMessageAdded(text="persisted"))
    with SqliteEventStore(db) as store:
        assert store.get(stored.id) == stored


def test_newer_database_layout_is_refused_untouched(db: Path) -> None:
    db.parent.mkdir(parents=True)
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA user_version = {DATABASE_FORMAT_VERSION + 1}")
    raw.close()
    with pytest.raises(SchemaVersionError, match="newer"):
        SqliteEventStore(db)
    raw = sqlite3.connect(db)
    try:
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
        assert "events" not in tables
        assert raw.execute("PRAGMA user_version").fetchone()[0] == DATABASE_FORMAT_VERSION + 1
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        raw.close()


def test_newer_events_schema_is_refused(db: Path) -> None:
    SqliteEventStore(db).close()
    set_schema_version(db, "events", 99)
    with pytest.raises(SchemaVersionError, match=r"'events' tables .* version 99"):
        SqliteEventStore(db)


def test_payload_is_stored_as_json(store: SqliteEventStore, db: Path) -> None:
    stored = store.append("s1", "w", ToolInvocationCompleted(tool="ls", arguments={"a": [1, 2]}))
    raw = sqlite3.connect(db)
    try:
        (payload,) = raw.execute("SELECT payload FROM events WHERE id = ?", (stored.id,)).fetchone()
    finally:
        raw.close()
    assert json.loads(payload)["arguments"] == {"a": [1, 2]}


def test_injected_clock_sets_created_at(db: Path) -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    with SqliteEventStore(db, clock=lambda: moment) as store:
        stored = store.append("s1", "w", UserMessageAdded(text="x"))
    assert stored.created_at == "2030-01-02T03:04:05.678901+00:00"
