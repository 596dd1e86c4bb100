"""The Python API: ``kairox.open()``, its verbs and their async twins, and the documented example."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kairox
from kairox.api import KairoxApiError
from kairox.runtime.facade import AppFacade

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "notes.md").write_text("# Uploads\n\nFailed uploads retry with backoff.\n")
    (workspace / "other.md").write_text("# Lunch\n\nThe canteen opens at noon.\n")
    return workspace


def test_open_index_search_context(notes: Path):
    kx = kairox.open(notes)
    stats = kx.index()
    assert stats.added == 2
    result = kx.search("failed uploads retry", k=1)
    assert [Path(hit.uri).name for hit in result.hits] == ["notes.md"]
    assert {str(r.status) for r in result.reports} == {"ok"}
    assembly = kx.context("how do uploads retry?")
    messages = assembly.openai_messages()
    assert messages[-1] == {"role": "user", "content": "how do uploads retry?"}
    assert "retry with backoff" in messages[0]["content"]
    assert assembly.used_tokens <= assembly.budget


def test_async_twins_give_the_same_answers(notes: Path):
    kx = kairox.open(notes)

    async def run():
        await kx.aindex()
        found = await kx.asearch("canteen noon", k=1)
        assembly = await kx.acontext("when does the canteen open?")
        return found, assembly

    found, assembly = asyncio.run(run())
    assert Path(found.hits[0].uri).name == "other.md"
    assert [h.id for h in found.hits] == [h.id for h in kx.search("canteen noon", k=1).hits]
    assert "canteen" in assembly.messages[0].content


def test_sync_verbs_work_inside_a_running_event_loop(notes: Path):
    """An async framework (or a notebook) calling the sync API: same answers, no error."""
    kx = kairox.open(notes)
    kx.index()
    expected = [h.id for h in kx.search("canteen noon", k=2).hits]
    prompt = kx.context("when does the canteen open?").openai_messages()

    async def inside() -> tuple[list[str], list[dict[str, str]]]:
        found = kx.search("canteen noon", k=2)
        assembly = kx.context("when does the canteen open?")
        return [h.id for h in found.hits], assembly.openai_messages()

    assert asyncio.run(inside()) == (expected, prompt)
    kx.close()


def test_propose_memory_goes_through_approval(notes: Path):
    kx = kairox.open(notes)
    pending = kx.propose_memory("user", "Prefers tabs.", key="indent")
    assert pending.status == "pending"
    assert pending.record.provenance["via"] == "api"
    assert kx.memories() == []
    assert [r.id for r in kx.memories(pending=True)] == [pending.record.id]
    AppFacade(cwd=notes).memory.approve(pending.record.id)  # as the TUI or CLI would
    assert [(r.key, r.body) for r in kx.memories("user")] == [("indent", "Prefers tabs.")]

    kept = kx.propose_memory("session", "Debugging the upload path.")
    assert kept.status == "accepted"
    assert [r.body for r in kx.memories("session")] == ["Debugging the upload path."]
    assert "Debugging the upload path." in kx.context("what am I doing?").messages[0].content

    rejected = kx.propose_memory("galaxy", "x", key="a")
    assert rejected.status == "rejected" and "unknown scope" in rejected.reason
    # Restating what waits merges with it; a body over [memory] max_body_chars is refused.
    again = kx.propose_memory("user", "prefers tabs", key="indent")
    assert again.status == "merged" and again.record.body == "Prefers tabs."
    too_long = kx.propose_memory("session", "x" * 8001)
    assert too_long.status == "rejected" and "max_body_chars" in too_long.reason
    with pytest.raises(KairoxApiError, match="unknown scope"):
        kx.memories("galaxy")


def test_bad_path_and_profile_fail_at_open(notes: Path):
    with pytest.raises(KairoxApiError, match="not a folder"):
        kairox.open(notes / "missing")
    with pytest.raises(Exception, match="did you mean 'default'"):
        kairox.open(notes, profile="defualt")


def test_the_documented_example_runs(notes: Path):
    """docs/python-api.md's first example, run as a user would paste it."""
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    result = subprocess.run(
        [sys.executable, "-c", example], cwd=notes, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(str(notes / "notes.md"))
    assert "'workspace-fts': 'ok'" in result.stdout  # words only: hashing's default
    assert re.fullmatch(r"pending \d+", lines[-1])


def test_close_lets_go_and_the_next_call_reopens(notes: Path):
    with kairox.open(notes) as kx:
        kx.index()
        first = [h.id for h in kx.search("canteen", k=1).hits]
    assert [h.id for h in kx.search("canteen", k=1).hits] == first
    kx.close()


# -- sessions from your own agent loop ---------------------------------------------------

REMEMBER = 'Noted. <memory scope="user" key="retry">Uploads retry with backoff.</memory>'


def event_types(kx: kairox.Kairox, session: str) -> list[str]:
    return [e.type for e in kx.facade.events.list(session_id=session)]


def test_append_messages_sync_and_async(notes: Path):
    kx = kairox.open(notes)
    kx.append_messages(
        [{"role": "user", "content": "hi", "name": "Ann"}, {"role": "assistant", "content": "yo"}],
        session="s1",
    )

    async def more():
        said = kairox.SessionMessage("user", "later", time="2026-12-01T10:00:00Z")
        return await kx.aappend_messages([said], session="s1")

    result = asyncio.run(more())
    back = kx.messages("s1")
    assert [(r.message.role, r.message.content, r.message.name) for r in back] == [
        ("user", "hi", "Ann"),
        ("assistant", "yo", None),
        ("user", "later", None),
    ]
    assert result.event_ids == [back[-1].event_id]
    assert back[-1].when == "2026-12-01T10:00:00+00:00"
    (summary,) = kx.sessions()
    assert (summary.session_id, summary.messages) == ("s1", 3)
    assert summary.last == "2026-12-01T10:00:00+00:00"
    with pytest.raises(kairox.MessageError, match="message 1: unknown role"):
        kx.append_messages([{"role": "bot", "content": "x"}], session="s1")
    assert len(kx.messages("s1")) == 3


def test_an_agent_loop_records_each_prompt_once_with_its_taint(notes: Path):
    kx = kairox.open(notes)
    kx.index()
    ctx = kx.context("how do uploads retry?", session="loop")
    assert event_types(kx, "loop") == []  # context records nothing
    result = kx.record_reply(REMEMBER, session="loop", model="my-model")
    assert result.text == "Noted."
    (pending,) = result.proposals.pending
    # The model read the workspace's text: the proposal says so.
    assert pending.injection_warning and pending.tainted_by == ctx.tainted_by
    assert any(t.startswith("workspace:") for t in ctx.tainted_by)
    assert event_types(kx, "loop")[:3] == [
        "UserMessageAdded",
        "ContextAssembled",
        "AssistantMessageCompleted",
    ]
    # A prompt the caller appended itself is not recorded a second time.
    kx.append_messages([{"role": "user", "content": "and then?"}], session="loop")
    kx.record_reply("Then it gives up.", session="loop", prompt="and then?")
    # No context() and no prompt: the reply answers the last message.
    kx.record_reply("Anything else?", session="loop")
    said = [(r.message.role, r.message.content) for r in kx.messages("loop")]
    assert said == [
        ("user", "how do uploads retry?"),
        ("assistant", "Noted."),
        ("user", "and then?"),
        ("assistant", "Then it gives up."),
        ("assistant", "Anything else?"),
    ]


def test_recorded_replies_compact_the_session(workspace: Path):
    from tests.conftest import SESSION_PROFILES

    (workspace / "kairox.toml").write_text(SESSION_PROFILES)
    kx = kairox.open(workspace, profile="tiny")

    async def loop():
        results = []
        for i in range(8):
            await kx.acontext(f"question {i} " + "context " * 20, session="long")
            results.append(await kx.arecord_reply(f"reply {i} " + "the plan " * 30, session="long"))
        return results

    results = asyncio.run(loop())
    assert any(r.compaction is not None and r.compaction.status == "completed" for r in results)
    assert "CompactionSummary" in event_types(kx, "long")
    assert len(kx.messages("long")) == 16  # nothing deleted


def test_a_busy_session_refuses_a_second_recorder(notes: Path):
    from kairox.support.paths import state_lock

    kx = kairox.open(notes)
    with state_lock(kx.facade.database, "session", "busy", wait=False):
        with pytest.raises(kairox.SessionBusyError, match="'busy' is busy"):
            kx.record_reply("hello", session="busy", prompt="hi")
        with pytest.raises(kairox.SessionBusyError):
            kx.append_messages([{"role": "user", "content": "x"}], session="busy")
        kx.context("still answers", session="busy")  # assembling records nothing
    assert kx.messages("busy") == []
    kx.record_reply("hello", session="busy", prompt="hi")  # free again
    assert len(kx.messages("busy")) == 2


def test_the_documented_agent_loop_runs_against_an_openai_server(notes: Path):
    """docs/python-api.md's OpenAI SDK loop, run as pasted, against the loopback server."""
    from kairox.testing.openai_server import OpenAITestServer

    pytest.importorskip("openai", reason="the agent loop example needs the openai package")
    section = DOC.read_text().split("## Sessions from your own agent loop", 1)[1]
    example = re.search(r"```python[^\n]*\n(.*?)```", section, re.DOTALL).group(1)
    assert len(example.strip().splitlines()) <= 16
    kairox.open(notes).index()
    replies = [
        'Three times. <memory scope="user" key="uploads.retry">Three retries.</memory>',
        "Then the upload is marked failed.",
    ]
    with OpenAITestServer(replies, api_key="sk-test", models=["gpt-4o-mini"]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
        result = subprocess.run(
            [sys.executable, "-c", example],
            cwd=notes,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        requests = [r.json["messages"] for r in server.chat_requests]
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Three times.",
        "proposed: uploads.retry Three retries.",
        "Then the upload is marked failed.",
    ]
    # The second request carried the first turn as history, its marker already removed.
    assert {"role": "assistant", "content": "Three times."} in requests[1]
    assert "retry with backoff" in requests[0][0]["content"]  # the workspace's hit
    said = [
        (r.message.role, r.message.content) for r in kairox.open(notes).messages("support-chat")
    ]
    assert said == [
        ("user", "How do failed uploads retry?"),
        ("assistant", "Three times."),
        ("user", "And after the last retry?"),
        ("assistant", "Then the upload is marked failed."),
    ]


@pytest.fixture
def long_notes(workspace: Path) -> Path:
    """One file cut into many small chunks that all match, and two short ones."""
    (workspace / "kairox.toml").write_text("[workspace]\nchunk_tokens = 16\nchunk_overlap = 0\n")
    retry = "\n\n".join(f"Upload retry rule {n}: failed uploads retry again." for n in range(12))
    (workspace / "retry.md").write_text(retry + "\n")
    (workspace / "queue.md").write_text("A failed upload goes back on the queue.\n")
    (workspace / "lunch.md").write_text("The canteen opens at noon.\n")
    return workspace


def test_search_by_file_gives_one_hit_per_file(long_notes: Path):
    kx = kairox.open(long_notes)
    kx.index()
    chunks = kx.search("failed uploads retry", k=5).hits
    assert [Path(h.uri).name for h in chunks].count("retry.md") > 1
    files = kx.search("failed uploads retry", k=5, by_file=True).hits
    names = [Path(h.uri).name for h in files]
    assert len(names) == len(set(names)) and names[:2] == ["retry.md", "queue.md"]
    assert files[0].metadata["file_chunks"] > 1
    first, last = files[0].metadata["file_lines"]
    assert first <= files[0].metadata["line_start"] <= files[0].metadata["line_end"] <= last


def test_a_config_path_that_is_not_a_file_names_both_ways_to_set_it(notes: Path):
    with pytest.raises(Exception, match=re.escape("--config / config_path=")) as caught:
        kairox.open(notes, config_path="/dev/zero")
    assert "point --config at" not in str(caught.value)


@pytest.mark.parametrize("bad", [[], "[]", 0, ["year"]])
def test_a_filter_that_is_not_a_mapping_is_refused_whatever_its_type(notes: Path, bad):
    from kairox.retrieval.filters import FilterError

    kx = kairox.open(notes)
    kx.index()
    with pytest.raises(FilterError):
        kx.search("uploads", filters=bad)
    assert kx.search("uploads", filters=None).hits  # None: no filter


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_query_is_refused_as_the_cli_refuses_it(notes: Path, blank):
    from kairox.runtime.search_options import EmptyQueryError

    kx = kairox.open(notes)
    with pytest.raises(EmptyQueryError, match="the query is empty"):
        kx.search(blank)
    with pytest.raises(EmptyQueryError):
        asyncio.run(kx.asearch(blank))


def test_an_unknown_search_option_names_search_and_what_it_accepts(notes: Path):
    kx = kairox.open(notes)
    with pytest.raises(TypeError) as caught:
        kx.search("uploads", chunks=True)
    said = str(caught.value)
    assert said.startswith("search() got an unexpected keyword argument 'chunks'")
    assert "by_file" in said and "filters" in said and "_prepared" not in said


def test_a_recorded_reply_keeps_no_whitespace_its_markers_left_at_the_end(notes: Path):
    kx = kairox.open(notes)
    reply = (
        "You deploy to  ams. "
        '<memory scope="workspace" key="deploy.region">ams</memory> '
        '<memory scope="session">Answers briefly.</memory> \n'
    )
    turn = kx.record_reply(reply, session="deploy", prompt="where do I deploy?")
    assert turn.text == "You deploy to  ams."  # inner text untouched
    assert kx.messages("deploy")[-1].message.content == "You deploy to  ams."
