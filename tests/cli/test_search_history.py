"""``kairox search --history``: the messages of the workspace's sessions, searched."""

from __future__ import annotations

import asyncio
import json

import pytest

from kairox.runtime.facade import AppFacade
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
    own = json.loads(
        invoke("search", "--history", "pier", "--session", "harbour-trip", "--json").output
    )
    assert own["scope"] == "own" and own["hits"][0]["messages"][1]["speaker"] == "Bob"


@pytest.fixture
def harbour(invoke, workspace):
    (workspace / "kairox.toml").write_text(SCRIPTED_DEFAULT_PROFILE)
    with AppFacade(cwd=workspace) as facade:
        asyncio.run(facade.append_messages("harbour-trip", MESSAGES))
        asyncio.run(
            facade.append_messages(
                "harbour-trip",
                [
                    {"role": "user", "content": "And the pier for the ferry?", "name": "Ann"},
                    {"role": "assistant", "content": "Pier 4, by the ferry.", "name": "Bob"},
                ],
            )
        )
    return invoke


def test_each_history_hit_is_its_own_block_with_its_context_under_it(harbour):
    shown = harbour("search", "--history", "pier")
    assert shown.exit_code == 0, shown.output
    found = json.loads(harbour("search", "--history", "pier", "--json").output)
    blocks = shown.output.strip().split("\n\n")
    assert len(blocks) == len(found["hits"]) > 1, shown.output
    for rank, block in enumerate(blocks, start=1):
        lines = block.splitlines()
        assert lines[0].lstrip().startswith(f"{rank}. ")  # the hit, on its own number
        assert all(line.startswith("       context, ") for line in lines[1:])
    assert "context, before: " in shown.output and "context, after: " in shown.output
    for hit, block in zip(found["hits"], blocks, strict=True):  # --json: the same hits
        assert len(block.splitlines()) == len(hit["messages"])
        assert sum(m["hit"] for m in hit["messages"]) == 1


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--source", "workspace"], "--source"),
        (["--filter", "year >= 2020"], "--filter"),
        (["--rerank", "none"], "--rerank"),
        (["--query-transform", "none"], "--query-transform"),
        (["--fusion", "rrf"], "--fusion"),
        (["--chunks"], "--chunks"),
        (["--format", "table"], "--format table"),
        (["--format", "vimgrep"], "--format vimgrep"),
    ],
)
def test_history_refuses_options_that_do_not_apply_to_it(harbour, option, named):
    refused = harbour("search", "--history", "pier", *option)
    assert refused.exit_code == 2, refused.output
    assert f"{named} does not apply to --history" in refused.output
    assert "-k, --session, --json (or --format json) and --workspace" in refused.output


def test_history_of_an_unknown_session_is_an_error_naming_it(harbour):
    refused = harbour("search", "--history", "pier", "--session", "nosuch")
    shown = harbour("session", "show", "nosuch")
    assert refused.exit_code == shown.exit_code == 1, refused.output
    assert "no session 'nosuch' with messages" in refused.output
    assert "no session 'nosuch' with messages" in shown.output


def test_session_without_history_is_refused(harbour):
    refused = harbour("search", "pier", "--session", "harbour-trip")
    assert refused.exit_code == 2 and "--session applies to --history only" in refused.output
