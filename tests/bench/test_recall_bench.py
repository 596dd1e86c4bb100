"""``kairox bench recall`` on a tiny LoCoMo-format file written here."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kairox.bench.locomo import load_locomo
from kairox.bench.recall import RecallBenchError, benchmark
from kairox.cli.bench_recall_cmd import recall
from tests.bench.conftest import command_cli

FILLER = "We talked about the weather and how grey the sky was all week long."


def conversation(sample: str, fact: str, date: str) -> dict:
    early = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": fact},
        {
            "speaker": "Bob",
            "dia_id": "D1:2",
            "text": "Wow, tell me more!",
            "blip_caption": "a kite",
        },
    ]
    late = [
        {"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D2:{i + 1}", "text": f"{FILLER} ({i})"}
        for i in range(60)
    ]
    return {
        "sample_id": sample,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": date,
            "session_1": early,
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": late,
            "session_3_date_time": "9:00 am on 3 June, 2023",  # a date with no turns
        },
        "qa": [
            {"question": "What did Ann build?", "answer": "x", "category": 4, "evidence": ["D1:1"]},
            {"question": "What is the sky like?", "category": 1, "evidence": ["D:2:060; D2:59"]},
            {"question": "Is it sunny?", "category": 5, "evidence": ["D2:3", "D9:9"]},
        ],
    }


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "tiny-locomo.json"
    items = [
        conversation(
            "c1", "I built a zeppelin from balsa wood last spring.", "1:56 pm on 8 May, 2023"
        ),
        conversation("c2", "I built a harpsichord in my garage.", "10:04 am on 9 May, 2023"),
    ]
    path.write_text(json.dumps(items))
    return path


def test_the_file_reads_as_dated_speaker_turns_with_normalised_evidence(dataset):
    first = load_locomo(dataset)[0]
    assert first.turns[0].time == "2023-05-08T13:56:00"
    assert first.turns[1].text == "Wow, tell me more! [image: a kite]"
    assert [q.evidence for q in first.questions] == [("D1:1",), ("D2:60", "D2:59"), ("D2:3",)]


def test_recall_finds_what_the_window_lost_and_the_references_run_beside_it(dataset):
    report = benchmark(dataset, budgets=(300, 600), ks=(1, 5))
    scores = report["evidence_recall"]
    assert report["questions"] == {"1": 2, "4": 2, "5": 2, "1-4": 4}
    single = {system: row["4"] for system, row in scores.items()}
    # The fact was said first: no newest-turns window holds it, recall brings it back.
    assert single["newest@300"] == single["newest@600"] == 0.0
    assert single["prompt@300"] == single["recall@1"] == 1.0
    assert single["bm25@5"] == 1.0
    assert scores["newest@600"]["1"] == 1.0  # the newest turns are what a window keeps
    assert set(report["prompt_tokens"]) == {"300", "600"}
    assert all(0 < report["prompt_tokens"][b] <= int(b) for b in ("300", "600"))
    assert report["conversations"] == ["c1", "c2"] and report["turns"] == 124


def test_the_cli_prints_the_table_and_refuses_an_unknown_conversation(dataset):
    args = ["recall", "--dataset", str(dataset), "--budgets", "300", "--ks", "1"]
    shown = CliRunner().invoke(command_cli(recall), [*args, "--conversations", "c2"])
    assert shown.exit_code == 0, shown.output
    assert "prompt@300" in shown.output and "bm25@1" in shown.output
    wrong = CliRunner().invoke(command_cli(recall), [*args, "--conversations", "c3"])
    assert wrong.exit_code == 2 and "no conversation c3 (known: c1, c2)" in wrong.output
    with pytest.raises(RecallBenchError, match="expected a JSON list"):
        dataset.write_text("{}")
        benchmark(dataset)
