"""``kairox bench generate-queries`` against the OpenAI-compatible loopback server."""

from __future__ import annotations

import json

from kairox.bench.generate import NOTE
from kairox.testing import CORPUS
from kairox.testing.openai_server import OpenAITestServer

KEY = "sk-generate-test"


def test_questions_become_a_beir_dataset_the_benchmark_reads(
    kb_workspace, invoke, tmp_path, monkeypatch
):
    monkeypatch.setenv("GEN_TEST_KEY", KEY)
    replies = ["What are Saturn's rings made of?\n", '"How does espresso get its crema?"', "Why?"]
    with OpenAITestServer(replies, api_key=KEY, models=["writer-1"]) as server:
        with (kb_workspace / "kairox.toml").open("a") as handle:
            handle.write(
                f'\n[profiles.default]\nmodel = "writer-1"\nbase_url = "{server.base_url}"\n'
                'api_key_env = "GEN_TEST_KEY"\n'
            )
        out = tmp_path / "generated"
        result = invoke("bench", "generate-queries", "--kb", "papers", "--n", "3", "--out", out)
        assert result.exit_code == 0, result.output
        requests = server.chat_requests
    assert len(requests) == 3
    prompts = [r.json["messages"][0]["content"] for r in requests]
    assert all(r.json["model"] == "writer-1" for r in requests)
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    qrels = (out / "qrels" / "test.tsv").read_text().splitlines()[1:]
    texts = {doc.id: doc.text for doc in CORPUS}
    for prompt, row in zip(prompts, qrels, strict=True):
        _, doc_id, grade = row.split("\t")
        assert grade == "1" and texts[doc_id][:60] in prompt  # its own passage was asked
    expected = ["What are Saturn's rings made of?", "How does espresso get its crema?", "Why?"]
    assert [q["text"] for q in queries] == expected
    corpus = (out / "corpus.jsonl").read_text().splitlines()
    assert len(corpus) == len(CORPUS)
    manifest = json.loads((out / "generated.json").read_text())
    assert manifest["model"] == "writer-1" and manifest["generated"] is True
    assert "recall of the sampled passage only" in manifest["note"]

    # the benchmark says what such judgments measure, in its output and its report
    report_file = tmp_path / "run.json"
    result = invoke(
        "bench",
        "retrieval",
        "--no-isolate",
        "--dataset",
        out,
        "--systems",
        "sqlite-fts",
        "--out",
        report_file,
    )
    assert result.exit_code == 0, result.output
    assert NOTE in " ".join(result.output.split())
    assert json.loads(report_file.read_text())["judgments"]["model"] == "writer-1"
    page = tmp_path / "report.html"
    assert invoke("bench", "report", report_file, "--out", page).exit_code == 0
    assert "recall of the sampled passage only" in page.read_text()


def test_a_kind_that_cannot_read_passages_back_is_refused(workspace, invoke, tmp_path):
    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.notes]\nkind = "example-jsonl"\npath = "notes.jsonl"\n'
    )
    (workspace / "notes.jsonl").write_text('{"id": "n1", "text": "hello"}\n')
    result = invoke("bench", "generate-queries", "--kb", "notes", "--out", tmp_path / "g")
    assert result.exit_code == 1
    assert "cannot read its passages back" in " ".join(result.output.split())
