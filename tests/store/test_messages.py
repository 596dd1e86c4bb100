"""Session messages: validation, the event each role is recorded as, and reading them back."""

from __future__ import annotations

import pytest

from kairox.store.events import SqliteEventStore, UserMessageAdded
from kairox.store.messages import (
    MessageError,
    SessionMessage,
    TranscriptError,
    history_message,
    message_event,
    messages_from,
    parse_time,
    read_messages,
    read_transcript,
)


@pytest.fixture
def events(tmp_path):
    store = SqliteEventStore(tmp_path / "kairox.db")
    yield store
    store.close()


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2023-05-08T13:56:00Z", "2023-05-08T13:56:00+00:00"),
        ("2023-05-08T13:56:00+02:00", "2023-05-08T13:56:00+02:00"),
        ("2023-05-08 13:56", "2023-05-08T13:56:00"),  # naive stays naive
        ("2023-05-08", "2023-05-08T00:00:00"),
    ],
)
def test_times_are_checked_and_normalised(given, stored):
    assert parse_time(given) == stored
    assert SessionMessage("user", "hi", time=given).time == stored


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"role": "user", "content": "x", "time": "8 May 2023"}, "not ISO 8601"),
        ({"role": "user", "content": "x", "speaker": "Ann"}, "unknown key 'speaker'"),
        ({"role": "user"}, "missing content"),
        ({"role": "user", "content": 3}, "content must be a string"),
        ({"role": "user", "content": "x", "name": ""}, "name must be a non-empty string"),
        (["user", "x"], "must be an object"),
    ],
)
def test_bad_messages_say_what_is_wrong(data, error):
    with pytest.raises(MessageError, match=error):
        SessionMessage.from_dict(data)


def test_messages_from_names_the_bad_one():
    with pytest.raises(MessageError, match=r"message 2: unknown role 'bot'"):
        messages_from([{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}])


def test_every_role_reads_back_from_its_event(events):
    said = [
        SessionMessage("system", "Be brief.", name="setup"),
        SessionMessage("user", "hi", name="Caroline", time="2023-05-08T13:56:00Z"),
        SessionMessage("tool", '{"temp": 21}', name="weather"),
        SessionMessage("tool", "no name"),
        SessionMessage("assistant", "It is 21 degrees.", time="2023-05-08T13:57:00"),
    ]
    kinds = [message_event(m, turn_id="t1").type for m in said]
    assert kinds == [
        "SystemMessageAdded",
        "UserMessageAdded",
        "ToolInvocationCompleted",
        "ToolInvocationCompleted",
        "AssistantMessageCompleted",
    ]
    events.append_many("s1", "w", [message_event(m, turn_id="t1") for m in said])
    back = read_messages(events, "s1")
    assert [r.message for r in back] == said
    assert {r.turn_id for r in back} == {"t1"}
    assert back[1].when == "2023-05-08T13:56:00+00:00"
    assert back[0].when == back[0].recorded_at  # no time given: when it was recorded


def test_events_stored_without_name_and_time_read_back(events):
    # What an older Kairox stored: the payload has neither field.
    with events.database.transaction() as conn:
        conn.execute(
            "INSERT INTO events(session_id, workspace_id, created_at, type, payload)"
            " VALUES ('old', 'w', '2026-01-01T00:00:00.000000+00:00', 'UserMessageAdded',"
            ' \'{"text": "hello", "turn_id": null}\')'
        )
    (found,) = read_messages(events, "old")
    assert found.message == SessionMessage("user", "hello")
    assert events.list(session_id="old")[0].event == UserMessageAdded("hello")


def test_history_messages_keep_names_a_chat_api_accepts():
    assert history_message(SessionMessage("user", "hi", name="Ann_2")).to_openai() == {
        "role": "user",
        "content": "hi",
        "name": "Ann_2",
    }
    spaced = history_message(SessionMessage("user", "hi", name="Ann Lee"))
    assert (spaced.content, spaced.name) == ("Ann Lee: hi", None)
    tool = history_message(SessionMessage("tool", "21", name="weather"))
    assert (tool.role, tool.content) == ("assistant", "[tool weather returned]\n21")


def test_a_broken_transcript_line_names_its_own_column():
    lines = [b'{"role": "user", "content": "hi"}\n', b'{"role": "user", "content":\n']
    with pytest.raises(TranscriptError) as caught:
        read_transcript(lines, "t.jsonl")
    # The value is missing at column 28, the end of line 2, not at column 1 of the next.
    assert "line 2" in str(caught.value) and "at column 28)" in str(caught.value)
