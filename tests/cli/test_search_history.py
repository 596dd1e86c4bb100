"""``kairox search --history``: the messages of the workspace's sessions, searched."""

from __future__ import annotations

import asyncio
import json

from kairox.facade import AppFacade
from tests.conftest import SCRIPTED_DEFAULT_PROFILE

MESSAGES = [
    {"role": "user", "content": "Where did we park the \x1b[31mboat\x1b[0m?", "name": "Ann"},
    {"role": "assistant", "content": "At pier 9.", "name": "Bob", "time": "2023-05-08T13:56:00"},
]


def test_history_search_shows_speaker_time_and_session_and_json(invoke, workspace):
    (workspace / "kairox.toml").write_text(SCRIPTED_DEFAULT_PROFILE)
    with AppFacade(cwd=workspace) as facade:
        asyncio.run(facade.append_messages("harbour-trip", MESSAGES))
    shown = invoke("search", "--history", "park")
    assert shown.exit_code == 0, shown.output
    assert "1. " in shown.output and "harbour-trip · Ann: Where did we park the" in shown.output
    assert "\x1b" not in shown.output  # untrusted text reaches the terminal without controls
    found = json.loads(invoke("search", "--history", "pier", "--json").output)
    assert found["scope"] == "workspace"
    first = found["hits"][0]["messages"]
    assert [m["speaker"] for m in first] == ["Ann", "Bob"]  # a short reply with its question
    assert first[1]["time"] == "2023-05-08T13:56:00" and first[1]["hit"] is True
    other = json.loads(invoke("search", "--history", "pier", "--session", "other", "--json").output)
    assert other["hits"] == []
