"""``kairox index``, ``kairox search`` and ``kairox kb ingest`` end to end, in-process."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def workspace_with_kb(workspace):
    (workspace / "docs").mkdir()
    (workspace / "docs" / "rocket.md").write_text("The rocket engine burns liquid oxygen.\n")
    (workspace / "docs" / "garden.txt").write_text("Tomatoes need sun and water.\n")
    (workspace / "papers.jsonl").write_text(
        json.dumps({"id": "p1", "title": "Orbits", "text": "Kepler laws of planetary orbits"})
        + "\n"
        + json.dumps(
            {"id": "p2", "text": "Oxygen isotopes in rocket exhaust", "metadata": {"y": 1}}
        )
        + "\n"
    )
    (workspace / "kairox.toml").write_text(
        "[workspace]\nvectors = true\n"  # these tests read the vectors' counts and hits
        # Deadlines no loaded machine misses: these tests read every source's status "ok".
        "timeout_ms = 60000\n"
        "[profiles.default]\n"
        "[profiles.research]\n"
        'aliases = ["r"]\n'
        "[knowledge_bases.papers]\n"
        'kind = "sqlite-fts"\n'
        'path = "state/papers.db"\n'
        'profile_aliases = ["r"]\n'
        "timeout_ms = 60000\n"
        "[knowledge_bases.broken]\n"
        'kind = "sqlite-fts"\n'
        'path = "missing.db"\n'
    )
    return workspace


def test_index_reports_counts_and_is_incremental(invoke, workspace_with_kb):
    first = invoke("index", "--json")
    assert first.exit_code == 0, first.output
    counts = json.loads(first.output)
    assert counts["added"] == 4 and counts["chunks_embedded"] > 0
    assert counts["pack_bytes"] > 0  # the vectors were packed for the next process
    again = json.loads(invoke("index", "--json").output)
    assert (again["added"], again["unchanged"], again["chunks_embedded"]) == (0, 4, 0)
    assert again["pack_bytes"] is None  # still current
    (workspace_with_kb / "docs" / "garden.txt").unlink()
    third = invoke("index")
    assert third.exit_code == 0
    assert "1 removed" in third.output
    assert "vectors packed for fast loading" in third.output


def test_search_before_indexing_says_how_to_fix(invoke, workspace_with_kb):
    result = invoke("search", "rocket", "--json")
    assert result.exit_code == 0, result.output
    reports = {r["source"]: r for r in json.loads(result.output)["sources"]}
    assert reports["workspace"]["status"] == "skipped"
    assert "kairox index" in reports["workspace"]["error"]


def test_search_fuses_workspace_and_visible_knowledge_bases(invoke, workspace_with_kb):
    assert invoke("index").exit_code == 0
    ingest = invoke("kb", "ingest", "papers", "papers.jsonl", "--json")
    assert ingest.exit_code == 0, ingest.output
    assert json.loads(ingest.output)["added"] == 2

    result = invoke("search", "rocket oxygen", "--profile", "research", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    reports = {r["source"]: r for r in data["sources"]}
    assert reports["papers"]["status"] == "ok" and reports["papers"]["hits"] >= 1
    assert reports["broken"]["status"] == "error"  # a dead source is reported, not fatal
    assert "kairox kb ingest broken" in reports["broken"]["error"]
    sources = {p["source"] for hit in data["hits"] for p in hit["sources"]}
    assert {"workspace", "workspace-fts", "papers"} <= sources
    assert [h["rank"] for h in data["hits"]] == list(range(1, len(data["hits"]) + 1))
    top = data["hits"][0]
    assert top["uri"].endswith("rocket.md") and "rocket" in top["snippet"].lower()

    # the default profile does not see `papers`
    default = json.loads(invoke("search", "rocket oxygen", "--json").output)
    assert "papers" not in {r["source"] for r in default["sources"]}

    table = invoke("search", "rocket oxygen", "-p", "r", "-k", "2")
    assert table.exit_code == 0
    assert "papers: ok" in table.output and "broken: error" in table.output


def test_search_unknown_profile_is_a_config_error(invoke, workspace_with_kb):
    result = invoke("search", "x", "--profile", "reserch")
    assert result.exit_code == 2
    assert "did you mean 'research'" in result.output


def test_ingest_is_incremental_and_prunes_on_request(invoke, workspace_with_kb):
    invoke("kb", "ingest", "papers", "papers.jsonl")
    (workspace_with_kb / "papers.jsonl").write_text(
        json.dumps({"id": "p1", "title": "Orbits", "text": "Kepler laws of planetary orbits"})
        + "\n"
    )
    kept = json.loads(invoke("kb", "ingest", "papers", "papers.jsonl", "--json").output)
    assert (kept["added"], kept["updated"], kept["unchanged"], kept["deleted"]) == (0, 0, 1, 0)
    pruned = json.loads(
        invoke("kb", "ingest", "papers", "papers.jsonl", "--prune", "--json").output
    )
    assert pruned["deleted"] == 1


def test_ingest_folder_and_errors(invoke, workspace_with_kb):
    result = invoke("kb", "ingest", "papers", "docs", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["added"] == 2

    (workspace_with_kb / "bad.jsonl").write_text('{"id": "x", "text": "ok"}\n{"id": "y"}\n')
    bad = invoke("kb", "ingest", "papers", "bad.jsonl")
    assert bad.exit_code == 1
    assert "bad.jsonl:2" in bad.output and "'text'" in bad.output

    unknown = invoke("kb", "ingest", "nope", "docs")
    assert unknown.exit_code == 2
    assert "knowledge_bases.nope" in unknown.output


def test_search_output_shows_brackets_literally(invoke, workspace):
    (workspace / "conf.toml.txt").write_text("[profiles.default] bracketed section header\n")
    invoke("index")
    result = invoke("search", "bracketed section header")
    assert result.exit_code == 0
    assert "[profiles.default]" in result.output


def test_a_skipped_file_s_name_shows_its_controls_escaped(invoke, workspace):
    (workspace / "kairox.toml").write_text("[profiles.default]\n")
    (workspace / "p\x1b]0;t\x07.pdf").write_bytes(b"%PDF-1.4 not really")
    result = invoke("index")
    assert result.exit_code == 0, result.output
    # As search output shows it: every control visible, BEL too (Rich alone drops it).
    assert "skipped p\\x1b]0;t\\x07.pdf: conversion failed" in result.output
    assert "\x07" not in result.output and "\x1b" not in result.output


def test_the_cap_comes_from_workspace_max_file_bytes(invoke, workspace):
    (workspace / "kairox.toml").write_text(
        '[workspace]\nmax_file_bytes = 100\n\n[knowledge_bases.kb]\nkind = "sqlite-fts"\n'
        'path = "kb.db"\n'
    )
    (workspace / "big.txt").write_text("z" * 200)
    (workspace / "small.txt").write_text("small")
    result = invoke("kb", "ingest", "kb", "big.txt", "small.txt")
    assert result.exit_code == 0, result.output
    assert "skipped big.txt: too large (200 bytes, the cap is 100)" in result.output
    assert "1 added" in result.output and "1 skipped (1 too large)" in result.output
    as_json = json.loads(invoke("kb", "ingest", "kb", "big.txt", "--json").output)
    assert as_json["skipped_reasons"] == {"too large": 1}


def test_a_source_the_profile_does_not_search_is_exit_2(invoke, workspace_with_kb):
    unknown = invoke("search", "rocket", "--source", "nope")
    assert unknown.exit_code == 2
    assert "'nope' is not a source" in unknown.output
    assert "Profile 'default' searches: workspace, workspace-fts, broken" in unknown.output
    hidden = invoke("search", "rocket", "--source", "papers")
    assert hidden.exit_code == 2
    assert "'papers' is a knowledge base profile 'default' does not see" in hidden.output
    assert "no hits" not in hidden.output
    invoke("kb", "ingest", "papers", "papers.jsonl")
    seen = invoke("search", "oxygen", "-p", "r", "--source", "papers", "--json")
    assert seen.exit_code == 0, seen.output
    assert [h["id"] for h in json.loads(seen.output)["hits"]] == ["p2"]


def test_index_reads_documents_and_counts_the_ones_it_cannot(invoke, workspace):
    from tests.workspace.convert.conftest import make_docx, make_pdf

    (workspace / "manual.docx").write_bytes(make_docx())
    (workspace / "tides.pdf").write_bytes(make_pdf([["Spring tides follow the full moon."]]))
    (workspace / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (workspace / "kairox.toml").write_text("[profiles.default]\n")
    result = invoke("index")
    assert result.exit_code == 0, result.output
    assert "1 skipped (1 conversion failed)" in result.output
    assert "skipped broken.pdf: conversion failed (pdf: is not a readable PDF" in result.output
    found = json.loads(invoke("search", "full moon tides", "--json").output)
    assert found["hits"][0]["uri"].endswith("tides.pdf")
    found = json.loads(invoke("search", "needle rests on zero", "--json").output)
    assert found["hits"][0]["uri"].endswith("manual.docx")


def test_a_semantic_knowledge_base_end_to_end(invoke, workspace):
    (workspace / "notes").mkdir()
    (workspace / "notes" / "uploads.md").write_text(
        "# Uploads\n\nA failed upload is retried three times. Then it waits an hour.\n"
    )
    (workspace / "kairox.toml").write_text(
        "[profiles.default]\n"
        '[knowledge_bases.notes]\nkind = "sqlite-fts"\npath = "state/notes.db"\n'
        'embedding_backend = "hashing"\n'
    )
    first = json.loads(invoke("kb", "ingest", "notes", "notes", "--json").output)
    assert first["added"] == 1
    assert list((workspace / "state" / "notes.db.vectors").glob("*.vectors.npy"))
    again = json.loads(invoke("kb", "ingest", "notes", "notes", "--json").output)
    assert (again["unchanged"], again["chunks_written"]) == (1, 0)
    found = json.loads(invoke("search", "retried upload", "--source", "notes", "--json").output)
    [report] = [r for r in found["sources"] if r["source"] == "notes"]
    assert report["status"] == "ok"
    assert found["hits"][0]["uri"].endswith("uploads.md")


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_is_a_usage_error(invoke, workspace_with_kb, query):
    result = invoke("search", query)
    assert result.exit_code == 2
    assert "the query is empty" in result.output


def test_a_zip_bomb_is_skipped_by_name_in_index_and_kb_ingest(kairox_process, workspace):
    from tests.workspace.convert.conftest import make_bomb, make_docx

    # 3 MB of XML in a few KB; the bound lowered in the config keeps the bomb small.
    bomb = make_bomb(make_docx(), "word/document.xml", padding=3_000_000)
    (workspace / "docs").mkdir()
    (workspace / "docs" / "bomb.docx").write_bytes(bomb)
    (workspace / "docs" / "rocket.md").write_text("The rocket engine burns liquid oxygen.\n")
    (workspace / "kairox.toml").write_text(
        "[workspace]\nmax_unpacked_bytes = 1000000\n"
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "papers.db"\n'
    )
    why = "skipped docs/bomb.docx: conversion failed (docx: unpacks to"
    indexed = kairox_process("index")
    assert indexed.returncode == 0, indexed.stderr
    assert why in indexed.stderr and "over the limit of 1,000,000" in indexed.stderr
    assert "2 added" in indexed.stdout and "1 skipped (1 conversion failed)" in indexed.stdout
    ingested = kairox_process("kb", "ingest", "papers", "docs")
    assert ingested.returncode == 0, ingested.stderr
    assert f"skipped {workspace / 'docs' / 'bomb.docx'}: conversion failed (docx: unpacks to" in (
        ingested.stderr
    )
    assert "1 added" in ingested.stdout and "1 skipped (1 conversion failed)" in ingested.stdout
