"""Hits you can open: ``path:12-40``, vimgrep lines, indented code; what is never indexed."""

from __future__ import annotations

import json
import re

import pytest

CODE = (
    "import os\n\n\nclass Launcher:\n    def ignite(self, fuel):\n"
    "        return os.path.join('pad', fuel)\n\n\ndef countdown(seconds):\n"
    "    for tick in range(seconds):\n        print(tick)\n"
)


@pytest.fixture
def code_workspace(workspace, monkeypatch):
    (workspace / "src").mkdir()
    (workspace / "src" / "launch.py").write_text(CODE)
    (workspace / "build").mkdir()
    (workspace / "build" / "countdown.txt").write_text("countdown in a build artefact\n")
    (workspace / "papers.jsonl").write_text(
        json.dumps({"id": "p1", "text": "countdown timers for launches"}) + "\n"
    )
    # $KAIROX_HOME and a knowledge base's files inside the workspace: never indexed.
    monkeypatch.setenv("KAIROX_HOME", str(workspace / ".state"))
    (workspace / "kairox.toml").write_text(
        "[workspace]\n"
        'exclude = ["build/"]\n'
        "[knowledge_bases.papers]\n"
        'kind = "sqlite-fts"\n'
        'path = "kb/papers.db"\n'
    )
    return workspace


def _indexed(invoke):
    result = invoke("index", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_kairox_folders_and_excluded_files_are_not_indexed(invoke, code_workspace):
    assert invoke("kb", "ingest", "papers", "papers.jsonl").exit_code == 0
    assert (code_workspace / "kb" / "papers.db").exists()
    counts = _indexed(invoke)
    # kairox.toml, papers.jsonl and src/launch.py; not build/, kb/ or .state/.
    assert counts["added"] == 3
    hits = json.loads(invoke("search", "countdown", "--json", "-k", "20").output)["hits"]
    paths = {h["metadata"].get("path") for h in hits if h["source"].startswith("workspace")}
    assert paths <= {"kairox.toml", "papers.jsonl", "src/launch.py"}
    assert "src/launch.py" in paths


def test_table_shows_relative_path_with_lines_and_indented_code(invoke, code_workspace):
    _indexed(invoke)
    result = invoke("search", "tick", "--source", "workspace-fts")
    assert result.exit_code == 0, result.output
    assert re.search(r"src/launch\.py:\d+-\d+", result.output)
    assert str(code_workspace) not in result.stdout  # relative to the workspace root
    assert "    print(tick)" in result.output  # indentation kept


def test_vimgrep_format_points_at_the_matching_line(invoke, code_workspace):
    _indexed(invoke)
    result = invoke("search", "tick", "--source", "workspace-fts", "--format", "vimgrep")
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    path, line, column, text = first.split(":", 3)
    assert path == "src/launch.py"
    assert CODE.split("\n")[int(line) - 1] == text
    assert text[int(column) - 1 :].lower().startswith("tick")


def test_plugins_lists_the_installed_grammars(invoke):
    result = invoke("plugins", "--all")
    assert result.exit_code == 0, result.output
    assert re.search(r"code grammars \(syntax-aware chunks\): .*python.*rust", result.output)


def test_pdf_hits_name_their_pages(invoke, workspace):
    from tests.workspace.convert.conftest import make_pdf

    pages = [
        ["Anchors hold the ship in the harbour through every storm."],
        ["Sails catch the wind at sea and carry the ship home."],
    ]
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.pdf").write_bytes(make_pdf(pages))
    (workspace / "kairox.toml").write_text("[workspace]\nchunk_tokens = 16\nchunk_overlap = 2\n")
    _indexed(invoke)
    found = json.loads(invoke("search", "sails wind", "--json", "--source", "workspace-fts").output)
    meta = found["hits"][0]["metadata"]
    assert (meta["path"], meta["page"]) == ("docs/guide.pdf", 2)
    assert "line_start" not in meta  # lines of extracted text are no place in the file
    shown = invoke("search", "sails wind", "--source", "workspace-fts")
    assert "docs/guide.pdf:p2" in shown.output


def test_a_broken_document_is_reported_on_every_run_but_read_once(invoke, workspace):
    (workspace / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    reason = "conversion failed (pdf: is not a readable PDF"
    for _ in range(2):
        result = invoke("index")
        assert result.exit_code == 0, result.output
        assert f"skipped broken.pdf: {reason}" in result.output


def test_plugins_lists_the_converters_and_their_file_types(invoke):
    result = invoke("plugins", "--all")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("document converters"))
    assert "pdf (.pdf)" in line and "notebook (.ipynb)" in line and ".docx" in line
