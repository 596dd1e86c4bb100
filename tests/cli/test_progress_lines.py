"""Piped (not a terminal), ``kairox index`` and ``kb ingest`` print plain progress lines."""

from __future__ import annotations

import json
import re


def test_piped_index_ends_with_a_plain_progress_line(kairox_process, workspace):
    (workspace / "notes.md").write_text("Rockets burn oxygen. Gardens need water.\n")
    (workspace / "kairox.toml").write_text('[workspace]\nembedding_backend = "hashing"\n')
    result = kairox_process("index")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("indexing ")]
    assert lines, result.stderr
    last = lines[-1]
    # notes.md and kairox.toml: one chunk each, every planned chunk done
    assert re.search(r": 2/2 chunks(, (\d+)/\2 sentences)? embedded", last), last
    assert "/s" in last and "\x1b[" not in result.stderr  # plain text, no terminal codes


def test_piped_kb_ingest_counts_documents(kairox_process, workspace):
    (workspace / "papers.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "text": f"paper {i}"}) + "\n" for i in range(3))
    )
    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "papers.db"\n'
    )
    result = kairox_process("kb", "ingest", "papers", "papers.jsonl")
    assert result.returncode == 0, result.stderr
    assert "ingesting into papers: 3/3 chunks written" in result.stderr


def _write_beir(root):
    root.mkdir()
    docs = {"d1": "rockets burn liquid oxygen", "d2": "gardens need water", "d3": "tea is brewed"}
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs.items())
    )
    queries = {"q1": "what do rockets burn", "q2": "what do gardens need"}
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries.items())
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return root


def test_piped_bench_prints_plain_progress_from_its_isolated_run(kairox_process, workspace):
    dataset = _write_beir(workspace / "tiny-beir")
    result = kairox_process(
        "bench", "retrieval", "--dataset", str(dataset), "--systems", "sqlite-fts", "--isolate"
    )
    assert result.returncode == 0, result.stderr
    # the forked child's progress reaches the log: each task's first and final line
    assert "indexing sqlite-fts: 3/3 · " in result.stderr, result.stderr
    assert "querying sqlite-fts: 2/2 · " in result.stderr, result.stderr
    assert "\x1b[" not in result.stderr


def test_plain_progress_prints_a_task_start_and_its_end_once(capsys):
    from kairox.cli import app

    with app.progress_bars(every_s=1e9) as advance:  # no line between start and end
        for done in range(5):
            advance("embedding", done, 4)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" · ")[0] for line in lines] == ["embedding: 0/4", "embedding: 4/4"]


def test_plain_progress_prints_as_often_as_asked(capsys):
    from kairox.cli import app

    with app.progress_bars(every_s=0) as advance:
        for done in range(3):
            advance("querying x", done, 2)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" · ")[0] for line in lines] == [f"querying x: {n}/2" for n in range(3)]
