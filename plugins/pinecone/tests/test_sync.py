"""The source as a ``VectorSyncTarget``: batching, idempotence, ids Pinecone cannot store
verbatim, retries, and ``kairox kb sync`` + ``kairox search`` end to end."""

from __future__ import annotations

import json
import os
import re

import kairox_pinecone
import numpy as np
import pytest
from kairox_pinecone import ID_METADATA_KEY, PineconeAuthError, remote_id

from kairox.retrieval import Query, VectorRecord
from kairox.support.retry import RetryPolicy
from kairox.testing import kairox_process, run

FAST_WRITES = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, budget=10.0)


@pytest.fixture
def records(hashing) -> list[VectorRecord]:
    texts = [f"chunk {i} about topic{i % 7} and saturn ring {i}" for i in range(250)]
    vectors = hashing.embed(texts)
    return [
        VectorRecord(
            id=f"notes/file{i // 10}.md#{i % 10}@abcd1234",
            vector=vector.tolist(),
            text=text,
            metadata={"path": f"notes/file{i // 10}.md", "chunk": i % 10, "start": 0, "end": 9},
        )
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    ]


def _upserts(server) -> list[int]:
    return [len(r.json["vectors"]) for r in server.requests if r.path == "/vectors/upsert"]


def test_upsert_batches_100_vectors_per_request(server, make_source, records):
    source = make_source(server.url)
    source.upsert_vectors(records)
    assert _upserts(server) == [100, 100, 50]
    stored = server.vectors()
    assert len(stored) == 250
    first = stored[records[0].id]
    assert first.metadata == {**records[0].metadata, "text": records[0].text}
    np.testing.assert_allclose(first.values, records[0].vector, rtol=1e-6)


def test_upsert_twice_overwrites(server, make_source, records):
    source = make_source(server.url)
    source.upsert_vectors(records)
    changed = [VectorRecord(r.id, r.vector, r.text + " (edited)", r.metadata) for r in records]
    source.upsert_vectors(changed)
    stored = server.vectors()
    assert len(stored) == 250
    assert stored[records[7].id].metadata["text"].endswith("(edited)")


def test_upserted_vectors_are_found_with_their_text(server, make_source, records):
    source = make_source(server.url, namespace="sync", text_field="body")
    source.upsert_vectors(records[:20])
    assert server.namespaces() == ["sync"]
    hits = run(source.retrieve(Query("chunk 13 about topic6", k=1)))
    assert hits[0].id == records[13].id
    assert hits[0].text == records[13].text
    assert hits[0].uri == "notes/file1.md"


def test_delete_is_batched_and_missing_ids_are_fine(server, make_source, records):
    source = make_source(server.url)
    source.upsert_vectors(records)
    doomed = [r.id for r in records[:200]] + [f"missing-{i}" for i in range(900)]
    source.delete_vectors(doomed)
    deletes = [r for r in server.requests if r.path == "/vectors/delete"]
    assert [len(r.json["ids"]) for r in deletes] == [1000, 100]
    assert len(server.vectors()) == 50
    source.delete_vectors(doomed)  # again: nothing left to delete, still fine
    source.delete_vectors([])
    assert len(server.vectors()) == 50


def test_ids_pinecone_cannot_store_round_trip(server, make_source, hashing):
    odd = ["docs/café.md#0@abcd1234", "x" * 600, "nul\x00id", "100%.md#1"]
    vectors = hashing.embed(["café crème brûlée"] * len(odd))
    source = make_source(server.url)
    source.upsert_vectors(
        [
            VectorRecord(i, v.tolist(), f"text of {i[:20]}")
            for i, v in zip(odd, vectors, strict=True)
        ]
    )
    stored = server.vectors()
    assert set(stored) == {remote_id(i) for i in odd}
    assert all(i.isascii() and 0 < len(i) <= 512 for i in stored)
    assert remote_id("100%.md#1") == "100%.md#1"  # valid ids are kept as they are
    assert stored[remote_id(odd[0])].metadata[ID_METADATA_KEY] == odd[0]
    hits = run(source.retrieve(Query("café crème brûlée", k=10)))
    assert {h.id for h in hits} == set(odd)
    assert all(ID_METADATA_KEY not in h.metadata for h in hits)
    source.delete_vectors(odd)
    assert server.vectors() == {}


def test_writes_are_retried(server, make_source, records):
    source = make_source(server.url, namespace="ns")
    source.write_policy = FAST_WRITES
    server.throttle(2, retry_after=0, target="/vectors/upsert")
    server.fail(503, times=1, target="/vectors/delete")
    source.upsert_vectors(records[:10])
    assert server.count("/vectors/upsert") == 3
    source.delete_vectors([records[0].id])
    assert server.count("/vectors/delete") == 2
    assert len(server.vectors("ns")) == 9


def test_write_auth_failures_are_not_retried(server, make_source, records):
    source = make_source(server.url)
    source.write_policy = FAST_WRITES
    server.api_key = "rotated"
    with pytest.raises(PineconeAuthError, match="KAIROX_TEST_PINECONE_KEY"):
        source.upsert_vectors(records[:5])
    assert server.count() == 1


def test_upsert_checks_dimensions_first(server, make_source, records, api_key):
    source = make_source(server.url)
    bad = VectorRecord("short", [0.1] * 10, "too short")
    with pytest.raises(ValueError, match="'short' has a 10-dim vector"):
        source.upsert_vectors([records[0], bad])
    assert server.count() == 0


def test_all_zero_vectors_are_skipped(server, make_source, records):
    source = make_source(server.url)
    source.upsert_vectors([records[0], VectorRecord("empty", [0.0] * 384, "---")])
    assert set(server.vectors()) == {records[0].id}


def test_the_source_is_what_kb_sync_expects(server, make_source):
    source = make_source(server.url, embedding_backend="hashing")
    assert source.embedding_backend == "hashing"
    assert kairox_pinecone.UPSERT_BATCH == 100


# -- the CLI, end to end ---------------------------------------------------------------


def test_kb_sync_then_search_through_the_cli(server, tmp_path, api_key):
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "saturn.md").write_text("Saturn's rings are made of water ice.\n")
    (workspace / "notes" / "café.md").write_text("Espresso is brewed from finely ground coffee.\n")
    (workspace / "kairox.toml").write_text(
        "[knowledge_bases.cloud]\n"
        'kind = "pinecone"\n'
        f'host = "{server.url}"\n'
        'embedding_backend = "hashing"\n'
        'api_key_env = "KAIROX_TEST_PINECONE_KEY"\n'
        'namespace = "ws"\n'
        "timeout_ms = 5000\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KAIROX_LOAD_PLUGINS"}
    env.update(
        KAIROX_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    for args in (["index", "."], ["kb", "sync", "cloud", "--json"]):
        done = kairox_process(*args, cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr + done.stdout
    # Piped, a sync ends with a plain progress line counting what it sent.
    again = kairox_process("kb", "sync", "cloud", "--full", cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr + again.stdout
    assert re.search(r"^syncing cloud: (\d+)/\1 chunks sent", again.stderr, re.M), again.stderr
    assert "\x1b[" not in again.stderr
    stored = server.vectors("ws")
    assert {v.metadata["path"] for v in stored.values()} >= {"notes/saturn.md", "notes/café.md"}
    assert any(ID_METADATA_KEY in v.metadata for v in stored.values())  # café.md

    done = kairox_process(
        "search", "espresso coffee", "--source", "cloud", "--json", cwd=workspace, env=env
    )
    assert done.returncode == 0, done.stderr + done.stdout
    found = json.loads(done.stdout)
    top = found["hits"][0]
    assert top["id"].startswith("notes/café.md#0@")  # the Kairox id, not the stored one
    assert "Espresso is brewed" in top["text"]
    assert [r["status"] for r in found["sources"] if r["source"] == "cloud"] == ["ok"]

    del env["KAIROX_TEST_PINECONE_KEY"]  # no key: the source is skipped, saying why
    done = kairox_process(
        "search", "espresso", "--source", "cloud", "--json", cwd=workspace, env=env
    )
    assert done.returncode == 0, done.stderr + done.stdout
    (report,) = [r for r in json.loads(done.stdout)["sources"] if r["source"] == "cloud"]
    assert report["status"] == "skipped"
    assert "KAIROX_TEST_PINECONE_KEY is not set" in report["error"]
