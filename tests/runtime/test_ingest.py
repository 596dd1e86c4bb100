"""kairox.runtime.ingest: what a file, folder or JSONL record becomes, and what is refused."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import apsw
import pytest

from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.retrieval import Query
from kairox.runtime.ingest import (
    BATCH_SIZE,
    MAX_METADATA_DEPTH,
    IngestError,
    IngestStats,
    collect_documents,
    ingest,
)
from kairox.testing import ModelHoldingEmbedder, run
from kairox.testing.unprivileged import require_permissions, run_unprivileged


def documents(tmp_path: Path, *paths: Path, max_bytes: int = 2_000_000):
    stats = IngestStats()
    found = list(collect_documents(list(paths), root=tmp_path, stats=stats, max_bytes=max_bytes))
    return found, stats


def jsonl(tmp_path: Path, *lines: str | bytes) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines))
    return path


# -- JSONL records --------------------------------------------------------------------


def test_invalid_utf8_names_file_line_and_byte(tmp_path):
    path = jsonl(tmp_path, '{"id": "a", "text": "ok"}', b'{"id": "b", "text": "caf\xe9"}')
    with pytest.raises(IngestError, match=r"records.jsonl:2: not valid UTF-8 \(byte 0xe9"):
        documents(tmp_path, path)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ('{"id": "a", "text": "\\ud800 half"}', r":1: 'text' holds a lone surrogate \(\\ud800\)"),
        ('{"id": "\\udfff", "text": "x"}', r":1: 'id' holds a lone surrogate"),
        ('{"id": "a", "text": "x", "metadata": {"k": "\\ud800"}}', "'metadata' holds a lone"),
        ('{"id": null, "text": "x"}', r":1: 'id' must be a string or a whole number, got null"),
        ('{"id": "a", "text": null}', r":1: 'text' must be a string, got null"),
        ('{"id": {"a": 1}, "text": "x"}', "'id' must be a string or a whole number, got dict"),
        ('{"id": true, "text": "x"}', "'id' must be a string or a whole number, got bool"),
        ('{"id": "a", "text": "x", "metadata": {"n": NaN}}', "NaN is not valid JSON"),
        ('{"id": "a", "text": "x", "metadata": {"n": -Infinity}}', "-Infinity is not valid"),
        ('{"id": "a", "text": "x", "title": 3}', "'title' must be a string, got int"),
    ],
)
def test_records_that_cannot_be_stored_faithfully_are_refused(tmp_path, record, message):
    with pytest.raises(IngestError, match=message) as info:
        documents(tmp_path, jsonl(tmp_path, record))
    assert "records.jsonl:1" in str(info.value)


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path):
    deep = '{"id": "a", "text": "x", "metadata": ' + '{"k": ' * 3000 + "1" + "}" * 3001
    with pytest.raises(IngestError, match=r"records.jsonl:1: nested too deeply"):
        documents(tmp_path, jsonl(tmp_path, deep))
    depth = MAX_METADATA_DEPTH + 1
    medium = '{"id": "a", "text": "x", "metadata": ' + '{"k": ' * depth + "1" + "}" * (depth + 1)
    with pytest.raises(IngestError, match=f"deeper than {MAX_METADATA_DEPTH} levels"):
        documents(tmp_path, jsonl(tmp_path, medium))


def test_whole_number_ids_and_null_optionals_are_stored_as_given(tmp_path):
    [doc], _ = documents(
        tmp_path, jsonl(tmp_path, '{"id": 12, "text": "x", "title": null, "uri": null}')
    )
    assert (doc.id, doc.title, doc.uri) == ("12", "", None)


def test_a_refused_record_changes_nothing(tmp_path):
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "text": "saturn rings"}\n')
    ingest(source, [good], root=tmp_path)
    bad = jsonl(tmp_path, '{"id": "b", "text": "jupiter"}', '{"id": "c", "text": "\\ud800"}')
    with pytest.raises(IngestError):
        ingest(source, [bad], root=tmp_path)
    assert set(source.fingerprints()) == {"a"}
    assert [h.id for h in run(source.retrieve(Query("saturn")))] == ["a"]


def test_a_model_the_run_loaded_is_released_before_the_vectors_are_packed(tmp_path):
    embedder = ModelHoldingEmbedder(dim=64)
    source = SqliteFtsSource("kb", tmp_path / "kb.db", embedder=embedder)
    seen_at_finish = []
    finish = source.finish
    source.finish = lambda: (seen_at_finish.append(embedder.loaded), finish())
    (tmp_path / "notes.txt").write_text("Saturn has rings of ice. Jupiter has none to speak of.")
    ingest(source, [tmp_path / "notes.txt"], root=tmp_path)
    assert embedder.events[-1] == "release" and seen_at_finish == [False]
    # The next search loads it again.
    assert [h.id for h in run(source.retrieve(Query("rings of ice")))][:1] == ["notes.txt"]
    assert embedder.loaded


def test_a_model_loaded_before_the_ingest_run_stays_loaded(tmp_path):
    embedder = ModelHoldingEmbedder(dim=64)
    embedder.embed(["a warm process searched first"])
    source = SqliteFtsSource("kb", tmp_path / "kb.db", embedder=embedder)
    (tmp_path / "notes.txt").write_text("Saturn has rings of ice.")
    ingest(source, [tmp_path / "notes.txt"], root=tmp_path)
    assert embedder.loaded and "release" not in embedder.events


# -- what is read, and what is skipped --------------------------------------------------


def test_only_regular_files_within_the_cap_are_read(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("x" * 5000)
    small = tmp_path / "small.txt"
    small.write_text("fine")
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    found, stats = documents(tmp_path, big, small, fifo, Path("/dev/zero"), max_bytes=4096)
    assert [d.id for d in found] == ["small.txt"]
    assert stats.skipped_reasons == {"too large": 1, "not a regular file": 2}
    assert dict(stats.skipped)[str(big)] == "too large (5,000 bytes, the cap is 4,096)"


def test_a_fifo_given_as_jsonl_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            documents(tmp_path, fifo)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    if reader.is_alive():  # unblock the reader before failing
        os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        pytest.fail("reading a FIFO blocked")
    [error] = outcome
    assert isinstance(error, IngestError) and "not a regular file" in str(error)


def test_a_folder_counts_what_the_walk_skipped(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("alpha")
    (folder / "big.md").write_text("y" * 5000)
    (folder / "blob.bin").write_bytes(b"\x00\x01binary")
    found, stats = documents(tmp_path, folder, max_bytes=4096)
    assert [d.id for d in found] == ["docs/a.md"]
    assert stats.skipped_reasons == {"binary": 1, "too large": 1}


UNREADABLE_INGEST = """
import json, sys
from pathlib import Path
from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.runtime.ingest import ingest

root = Path(sys.argv[1])
stats = ingest(SqliteFtsSource("kb", root / "kb.db"), [root / "docs"], root=root)
print(json.dumps(stats.as_json()))
"""


def test_an_unreadable_file_is_skipped_and_the_rest_ingested(tmp_path):
    require_permissions(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("readable")
    secret = docs / "secret.md"
    secret.write_text("hidden")
    secret.chmod(0)
    tmp_path.chmod(0o755)
    done = run_unprivileged(UNREADABLE_INGEST, str(tmp_path))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["added"] == 1
    assert stats["skipped"] == [{"path": str(secret), "why": "unreadable (Permission denied)"}]


# -- chunking ---------------------------------------------------------------------------


def _long_markdown(sections: int = 12) -> str:
    parts = ["# Runbook\n"]
    for n in range(sections):
        parts.append(f"\n## Step {n}\n\n")
        parts.append(
            " ".join(f"Sentence {m} about restarting the upload worker{n}." for m in range(12))
            + "\n"
        )
    return "".join(parts)


def test_a_long_file_is_stored_as_chunks_that_name_their_document(tmp_path):
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    doc = tmp_path / "runbook.md"
    doc.write_text(_long_markdown())
    stats = ingest(source, [doc], root=tmp_path, chunk_tokens=128, chunk_overlap=16)
    assert (stats.added, stats.chunks_written) == (1, len(source.fingerprints()))
    assert stats.chunks_written > 5
    hits = run(source.retrieve(Query("upload worker7", k=3)))
    top = hits[0]
    assert top.id.startswith("runbook.md#")
    assert top.metadata["document_id"] == "runbook.md"
    assert top.metadata["document_title"] == "runbook.md"
    assert top.metadata["document_uri"] == str(doc.resolve())
    assert top.metadata["heading"] == "Runbook > Step 7"
    text = doc.read_text()
    start, end = top.metadata["start"], top.metadata["end"]
    assert text[start:end] in top.text
    lines = text.splitlines()
    assert lines[top.metadata["line_start"] - 1] == "## Step 7"
    assert "worker7" in lines[top.metadata["line_end"] - 1]


def test_chunked_ingest_is_incremental_and_drops_chunks_a_document_lost(tmp_path):
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    doc = tmp_path / "runbook.md"
    doc.write_text(_long_markdown(12))
    ingest(source, [doc], root=tmp_path, chunk_tokens=128, chunk_overlap=16)
    before = set(source.fingerprints())
    again = ingest(source, [doc], root=tmp_path, chunk_tokens=128, chunk_overlap=16)
    assert (again.unchanged, again.chunks_written) == (1, 0)
    doc.write_text(_long_markdown(3))  # shorter: its later chunks must go
    shrunk = ingest(source, [doc], root=tmp_path, chunk_tokens=128, chunk_overlap=16)
    after = set(source.fingerprints())
    assert shrunk.updated == 1 and after < before
    assert not run(source.retrieve(Query("worker11")))
    assert run(source.retrieve(Query("worker2")))
    doc.write_text("A short note about uploads.")  # fits one chunk: stored as itself
    ingest(source, [doc], root=tmp_path, chunk_tokens=128, chunk_overlap=16)
    assert set(source.fingerprints()) == {"runbook.md"}


def test_passage_sized_data_can_opt_out_per_record_or_per_ingest(tmp_path):
    long_text = " ".join(f"word{n}" for n in range(600))
    records = jsonl(
        tmp_path,
        json.dumps({"id": "keep", "text": long_text, "chunk": False}),
        json.dumps({"id": "cut", "text": long_text}),
    )
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    ingest(source, [records], root=tmp_path, chunk_tokens=64, chunk_overlap=8)
    stored = set(source.fingerprints())
    assert "keep" in stored and "cut" not in stored
    assert {i for i in stored if i.startswith("cut#")} and len(stored) > 5
    whole = SqliteFtsSource("whole", tmp_path / "whole.db")
    ingest(whole, [records], root=tmp_path, chunk=False, chunk_tokens=64, chunk_overlap=8)
    assert set(whole.fingerprints()) == {"keep", "cut"}


def test_a_bad_chunk_flag_is_refused(tmp_path):
    with pytest.raises(IngestError, match=r":1: 'chunk' must be true or false, got str"):
        documents(tmp_path, jsonl(tmp_path, '{"id": "a", "text": "x", "chunk": "no"}'))


def test_documents_are_converted_and_a_broken_one_is_skipped_by_name(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "page.html").write_text(
        "<html><head><title>Ports</title><script>evil()</script></head>"
        "<body><nav>menu</nav><main><h1>Docking</h1><p>Use fenders.</p></main></body></html>"
    )
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    (folder / "notes.txt").write_text("plain notes")
    found, stats = documents(tmp_path, folder)
    by_id = {d.id: d for d in found}
    assert set(by_id) == {"docs/page.html", "docs/notes.txt"}
    assert by_id["docs/page.html"].text == "Docking\n\nUse fenders."
    assert by_id["docs/page.html"].title == "Ports"
    assert stats.skipped_reasons == {"conversion failed": 1}
    [(path, why)] = stats.skipped
    assert path.endswith("broken.pdf") and why.startswith("conversion failed (pdf: is not")


# -- streaming ----------------------------------------------------------------------------


class RecordingTarget(SqliteFtsSource):
    """A sqlite-fts source that notes each write's size in a shared event list."""

    def __init__(self, path: Path, events: list[tuple[str, int]]) -> None:
        super().__init__("kb", path)
        self.events = events

    def begin_run(self):
        self.events.append(("begin_run", 0))
        super().begin_run()

    def upsert(self, documents):
        self.events.append(("upsert", len(documents)))
        super().upsert(documents)

    def finish(self):
        self.events.append(("finish", 0))
        super().finish()


def _index_db(path: Path) -> apsw.Connection:
    return apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)


def _records(path: Path, count: int, prefix: str = "p") -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"{prefix}{n}", "text": f"passage {n}"}) + "\n" for n in range(count)
        )
    )
    return path


def test_a_bad_record_after_many_batches_of_good_ones_changes_nothing(tmp_path):
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    ingest(source, [_records(tmp_path / "old.jsonl", 3, "old")], root=tmp_path)
    good = _records(tmp_path / "good.jsonl", 2 * BATCH_SIZE + 7)
    bad = jsonl(tmp_path, '{"id": "x", "text": "fine"}', '{"id": "y"}')
    with pytest.raises(IngestError, match=r"records.jsonl:2: missing text"):
        ingest(source, [good, bad], root=tmp_path)
    assert set(source.fingerprints()) == {"old0", "old1", "old2"}


def test_inputs_are_checked_whole_then_written_in_batches_with_progress(tmp_path):
    events: list[tuple[str, int]] = []
    total = 2 * BATCH_SIZE + 7
    stats = ingest(
        RecordingTarget(tmp_path / "kb.db", events),
        [_records(tmp_path / "a.jsonl", total)],
        root=tmp_path,
        checked=lambda n: events.append(("checked", n)),
        planned=lambda n: events.append(("planned", n)),
        progress=lambda n: events.append(("progress", n)),
    )
    kinds = [kind for kind, _ in events]
    planned_at = kinds.index("planned")
    assert set(kinds[:planned_at]) == {"checked"} and events[planned_at - 1] == ("checked", total)
    assert events[planned_at] == ("planned", total)
    writes = [n for kind, n in events if kind == "upsert"]
    assert len(writes) == 3 and max(writes) <= BATCH_SIZE and sum(writes) == total
    assert sum(n for kind, n in events if kind == "progress") == total
    assert (stats.added, stats.chunks_written) == (total, total)
    # The run is framed for the target: sqlite-fts defers FTS5's merging to its finish.
    run_events = [kind for kind in kinds if kind in ("begin_run", "upsert", "finish")]
    assert run_events == ["begin_run", "upsert", "upsert", "upsert", "finish"]
    automerge = "SELECT v FROM documents_fts_config WHERE k = 'automerge'"
    assert _index_db(tmp_path / "kb.db").execute(automerge).fetchone() == (4,)


def test_the_last_copy_of_an_id_wins_and_the_first_leaves_no_chunks(tmp_path):
    first = tmp_path / "first.jsonl"
    first.write_text(json.dumps({"id": "doc", "text": _long_markdown(), "title": "old"}) + "\n")
    last = tmp_path / "last.jsonl"
    last.write_text(json.dumps({"id": "doc", "text": "A short note.", "title": "new"}) + "\n")
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    stats = ingest(source, [first, last], root=tmp_path, chunk_tokens=128, chunk_overlap=16)
    assert set(source.fingerprints()) == {"doc"}
    assert (stats.added, stats.chunks_written) == (1, 1)
    assert [h.text for h in run(source.retrieve(Query("note")))] == ["new\nA short note."]


def test_prune_deletes_what_no_input_holds_and_counts_documents(tmp_path):
    source = SqliteFtsSource("kb", tmp_path / "kb.db")
    doc = tmp_path / "runbook.md"
    doc.write_text(_long_markdown())
    ingest(source, [doc, _records(tmp_path / "a.jsonl", 4)], root=tmp_path, chunk_tokens=128)
    stats = ingest(source, [_records(tmp_path / "a.jsonl", 2)], root=tmp_path, prune=True)
    assert set(source.fingerprints()) == {"p0", "p1"}
    assert (stats.unchanged, stats.deleted) == (2, 3)  # runbook.md, p2 and p3
