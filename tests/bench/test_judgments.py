"""Your queries and qrels files, and how judged ids match the hits sources return."""

from __future__ import annotations

import pytest

from kairox.bench import BenchError
from kairox.bench.beir import DatasetError
from kairox.bench.judgments import (
    IdMatcher,
    check_known,
    check_returned,
    custom_dataset,
    load_qrels,
    load_queries,
)
from kairox.retrieval import Hit


def hit(id, uri=None, **metadata):
    return Hit(id, "text", 1.0, "s", uri, metadata)


def test_queries_as_jsonl_or_tsv(tmp_path):
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"id": "a", "text": "one"}\n\n{"_id": 7, "text": "two"}\n')
    assert load_queries(jsonl) == {"a": "one", "7": "two"}
    tsv = tmp_path / "q.tsv"
    tsv.write_text("query-id\ttext\na\tone\tand more\n")
    assert load_queries(tsv) == {"a": "one\tand more"}
    broken = tmp_path / "bad.jsonl"
    broken.write_text('{"text": "no id"}\n')
    with pytest.raises(DatasetError, match=r'bad\.jsonl:1: the query has no "id"'):
        load_queries(broken)


def test_qrels_as_trec_or_beir_graded(tmp_path):
    trec = tmp_path / "qrels.trec"
    trec.write_text("q1 0 d1 2\nq1 0 d2 0\nq2 Q0 d3 1\n")
    assert load_qrels(trec) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    beir = tmp_path / "qrels.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td 1\t3\n")
    assert load_qrels(beir) == {"q1": {"d 1": 3}}
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\td1\t1\nq1\td2\thigh\n")
    with pytest.raises(DatasetError, match="relevance 'high' is not an integer"):
        load_qrels(bad)


def test_judged_queries_need_their_text(tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "text": "one"}\n{"id": "extra", "text": "x"}\n')
    qrels = tmp_path / "r.trec"
    qrels.write_text("q1 0 d1 1\n")
    data = custom_dataset(queries, qrels)
    assert data.queries == {"q1": "one"} and not data.corpus
    qrels.write_text("q1 0 d1 1\nq9 0 d1 1\n")
    with pytest.raises(DatasetError, match="1 judged queries are not in"):
        custom_dataset(queries, qrels)


def test_a_document_judgment_counts_its_best_chunk_once():
    matcher = IdMatcher({"paper-1", "notes/a.md"})
    hits = [
        hit("paper-1#2", document_id="paper-1"),
        hit("other#0", document_id="other"),
        hit("paper-1#0", document_id="paper-1"),
        hit("other#1", document_id="other"),
        hit("notes/a.md#3", "/ws/notes/a.md", path="notes/a.md"),
        hit("s3://bucket/x.pdf", "s3://bucket/x.pdf"),
    ]
    assert matcher.ranking(hits) == ["paper-1", "other", "notes/a.md", "s3://bucket/x.pdf"]


def test_a_uri_judgment_matches(tmp_path):
    assert IdMatcher({"s3://b/x.pdf"}).key(hit("chunk-9", "s3://b/x.pdf")) == "s3://b/x.pdf"


def test_path_line_judgments_match_the_chunk_spanning_that_line(tmp_path):
    source = tmp_path / "src" / "app.py"
    source.parent.mkdir()
    lines = [f"line {n}\n" for n in range(1, 21)]
    source.write_text("".join(lines))
    start = sum(len(x) for x in lines[:9])  # line 10 starts here
    end = sum(len(x) for x in lines[:15])  # line 15 is the chunk's last
    matcher = IdMatcher({"src/app.py:12", "src/app.py:19"}, root=tmp_path)
    chunk = hit("src/app.py#1", str(source), path="src/app.py", start=start, end=end)
    assert matcher.key(chunk) == "src/app.py:12"
    later = hit("src/app.py#2", str(source), path="src/app.py", start=end, end=len("".join(lines)))
    assert matcher.key(later) == "src/app.py:19"


def test_mismatched_ids_stop_with_examples_of_both():
    with pytest.raises(BenchError) as caught:
        check_known("knowledge base 'papers'", {"4983", "5836"}, ["doc-1", "doc-2"])
    message = str(caught.value)
    assert message.startswith("0 of 2 judged documents exist in knowledge base 'papers'")
    assert "'doc-1', 'doc-2' there and '4983', '5836' in the qrels" in message
    check_known("kb", {"a"}, ["a#0", "b#0"])  # chunk ids of a judged document are fine
    with pytest.raises(BenchError, match="were returned by 'kb:cloud'"):
        check_returned("kb:cloud", {"a"}, {"q": ["x", "y"]})
    check_returned("kb:cloud", {"a"}, {"q": []})  # nothing returned: nothing to say
