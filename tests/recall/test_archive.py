"""The message archive: every message indexed once, as recorded; a killed writer converges."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.recall import MessageArchive
from kairox.runtime.facade import AppFacade
from tests.recall.conftest import record, said, write_config


def indexed_rows(archive: MessageArchive) -> tuple[int, int, int]:
    """(messages, FTS documents, vectors) the database holds."""
    db = archive.database.conn
    return tuple(
        db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("recall_messages", "recall_fts_docsize", "recall_vectors")
    )


def test_every_message_is_indexed_once_with_its_speaker_and_time(facade):
    ids = record(
        facade,
        "s1",
        [
            said("Ann", "I adopted a grey cat called Pixel."),
            said("Bob", "Lovely! How old is she?", role="assistant"),
            {"role": "tool", "content": "vet opening hours: 9-17", "name": "web_fetch"},
        ],
    )
    archive = facade.archive()
    assert archive.sync() == 3
    assert archive.sync() == 0
    first, second, tool = archive.rows.messages
    assert (first.event_id, first.who, first.time) == (ids[0], "Ann", "2023-05-08T13:56:00")
    assert second.role == "assistant" and second.who == "Bob"
    assert tool.tool_output and tool.who == "web_fetch" and tool.time  # the recorded time
    # Another process's archive on the same database finds nothing left to index.
    with MessageArchive(facade.database, facade.workspace_id, HashingEmbedder()) as other:
        assert other.sync() == 0
        assert len(other.rows) == 3
    assert indexed_rows(archive) == (3, 3, 3)


def test_an_archive_indexes_only_its_own_workspace(facade, tmp_path):
    record(facade, "s1", [said("Ann", "the harbour is closed")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_config(elsewhere)
    with AppFacade(cwd=elsewhere) as other:
        assert other.archive().sync() == 0
        assert other.recall("harbour", session_id="s2") == []
    assert facade.archive().sync() == 1


WRITER = textwrap.dedent(
    """
    import asyncio, os, signal
    from kairox.runtime.facade import AppFacade

    facade = AppFacade()
    first = [{"role": "user", "content": "the lighthouse keeper retired", "name": "Ann"}]
    asyncio.run(facade.append_messages("s1", first))
    facade.archive().sync()
    later = [
        {"role": "user", "content": "my zeppelin arrives on Tuesday", "name": "Ann"},
        {"role": "assistant", "content": "noted", "name": "Bob"},
    ]
    asyncio.run(facade.append_messages("s1", later))
    os.kill(os.getpid(), signal.SIGKILL)  # recorded, never indexed
    """
)


def test_indexing_converges_after_a_writer_is_killed(workspace):
    write_config(workspace)
    killed = subprocess.run(
        [sys.executable, "-c", WRITER], cwd=workspace, env=os.environ.copy(), timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    with AppFacade(cwd=workspace) as facade:
        archive = facade.archive()
        assert indexed_rows(archive) == (1, 1, 1)  # the index lags the event store
        assert archive.sync() == 2
        assert indexed_rows(archive) == (3, 3, 3)
        found = facade.recall("zeppelin", session_id="s1")
        assert found[0].messages[-1].text == "my zeppelin arrives on Tuesday"


def test_the_words_of_a_question_are_asked_without_its_stop_words(facade):
    record(
        facade,
        "s1",
        [
            said("Ann", "What did you do then? What was it like?"),
            said("Bob", "I adopted a puppy.", role="assistant"),
            said("Ann", "And what did you do when it was over?"),
        ],
    )
    archive = facade.archive()
    archive.sync()
    texts = {m.event_id: m.text for m in archive.rows.messages}
    # "what", "did", "you" and "do" say nothing about which message answers.
    found = archive.search_words("What did you do, did you adopt?", 10)
    assert [texts[event_id] for event_id, _ in found] == ["I adopted a puppy."]
    # A question of stop words alone still asks them.
    found = archive.search_words("What did you do?", 10)
    assert {texts[event_id] for event_id, _ in found} == {
        "What did you do then? What was it like?",
        "And what did you do when it was over?",
    }
