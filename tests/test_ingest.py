"""kairox.ingest: what a file, folder or JSONL record becomes, and what is refused."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.ingest import MAX_METADATA_DEPTH, IngestError, IngestStats, collect_documents, ingest
from kairox.retrieval import Query
from kairox.testing import run
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
from kairox.ingest import ingest

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
