"""``kairox bench code`` on a small sdist the test builds: corpus, queries, metrics."""

from __future__ import annotations

import ast
import io
import json
import tarfile
from pathlib import Path

import pytest

from kairox.bench.code import is_relevant
from kairox.bench.code_corpus import CodeQuery, build_corpus, strip_docstrings
from kairox.retrieval import Hit

MODULE = '''"""A module docstring."""

import math


def circle_area(radius):
    """Compute the area of a circle from its radius.

    More words that are not part of the query.
    """
    return math.pi * radius ** 2


def only_doc():
    """Return nothing useful at all."""


class Tank:
    """A fuel tank."""

    def refill(self, litres):
        """Pour fresh kerosene into the tank."""
        self.level = litres

    def _private(self):
        """Hidden helpers give no query."""
        return 0


def short():
    """Too short."""
    return 1
'''


def _sdist(folder: Path, name: str = "rocketlib-1.0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for relpath, text in {
            f"{name}/src/rocketlib/core.py": MODULE,
            f"{name}/tests/test_core.py": 'def test_x():\n    """Tests are not the corpus."""\n',
            f"{name}/setup.py": "from setuptools import setup\nsetup()\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(relpath)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def test_strip_docstrings_keeps_code_valid_and_removes_every_docstring():
    stripped = strip_docstrings(MODULE)
    tree = ast.parse(stripped)
    assert all(
        ast.get_docstring(node) is None
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
    )
    assert "Compute the area" not in stripped and "return math.pi" in stripped
    assert "def only_doc():\n    ...\n" in stripped  # a body of just a docstring stays valid


def test_corpus_queries_target_public_functions_in_the_stripped_copy(tmp_path):
    _sdist(tmp_path / "sdists")
    (tmp_path / "sdists").joinpath("README").write_text("not an sdist")
    queries = build_corpus(tmp_path / "sdists", tmp_path / "work")
    by_text = {q.text: q for q in queries}
    assert set(by_text) == {
        "Compute the area of a circle from its radius.",
        "Return nothing useful at all.",
        "Pour fresh kerosene into the tank.",
    }
    corpus = tmp_path / "work" / "corpus"
    assert sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*.py")) == [
        "rocketlib/src/rocketlib/core.py"
    ]
    lines = (corpus / "rocketlib/src/rocketlib/core.py").read_text().split("\n")
    refill = by_text["Pour fresh kerosene into the tank."]
    assert lines[refill.line_start - 1].strip() == "def refill(self, litres):"
    assert lines[refill.line_end - 1].strip() == "self.level = litres"
    assert {q.split for q in queries} <= {"train", "test"}


def test_relevance_needs_the_file_and_half_the_shorter_range():
    query = CodeQuery("a.py:f", "Do things.", "a.py", 10, 19, "test")

    def hit(path, first, last):
        meta = {"path": path, "line_start": first, "line_end": last}
        return Hit(id="x", text="t", score=1.0, source="s", metadata=meta)

    assert is_relevant(hit("a.py", 12, 16), query)  # inside the function
    assert is_relevant(hit("a.py", 1, 40), query)  # holds the whole function
    assert is_relevant(hit("a.py", 15, 30), query)  # 5 of 10 lines: half of the shorter
    assert not is_relevant(hit("a.py", 17, 60), query)  # 3 of 10
    assert not is_relevant(hit("b.py", 10, 19), query)


def test_bench_code_cli_reports_every_cell(invoke, tmp_path):
    _sdist(tmp_path / "sdists")
    out = tmp_path / "report.json"
    result = invoke(
        "bench",
        "code",
        "--sdists",
        str(tmp_path / "sdists"),
        "--work",
        str(tmp_path / "w"),
        "--embedders",
        "hashing",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    systems = {(r["chunking"], r["system"]) for r in report["systems"]}
    for chunking in ("lines", "syntax"):
        assert {(chunking, s) for s in ("fts", "hashing", "hybrid-hashing")} <= systems
    assert report["queries"]["all"] == 3
    fts = next(r for r in report["systems"] if r["system"] == "fts")
    assert 0 < fts["mrr@10"] <= 1 and fts["recall@10"] > 0
    assert "lines/hashing" in report["weight_tuning"]


def test_bench_code_without_sdists_says_how_to_get_them(invoke, tmp_path):
    (tmp_path / "empty").mkdir()
    result = invoke(
        "bench",
        "code",
        "--sdists",
        str(tmp_path / "empty"),
        "--work",
        str(tmp_path / "w"),
        "--embedders",
        "hashing",
    )
    assert result.exit_code == 2, result.output
    assert "pip download --no-binary" in result.output


@pytest.fixture
def invoke():
    from click.testing import CliRunner

    from kairox.cli import build_cli
    from kairox.plugin_host.manager import build_plugin_manager

    pm = build_plugin_manager(entry_points=False)
    return lambda *args: CliRunner().invoke(build_cli(pm), list(args))
