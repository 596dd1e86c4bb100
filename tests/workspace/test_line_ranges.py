"""Workspace hits carry line ranges and symbols; a file is cut again when its chunker changes."""

from __future__ import annotations

import sqlite3

import pytest

from kairox.workspace.rag_index import WorkspaceRagIndex

CODE = (
    "import os\n\n\nclass Launcher:\n    def ignite(self, fuel):\n"
    "        return os.path.join('pad', fuel)\n\n\ndef countdown(n):\n    return list(range(n))\n"
)


def _index(database, root, embedder, **options):
    return WorkspaceRagIndex(database, root, embedder, chunk_tokens=64, chunk_overlap=8, **options)


def test_hits_name_their_lines_and_symbol(database, project, embedder):
    (project / "src" / "launch.py").write_text(CODE)
    index = _index(database, project, embedder)
    try:
        index.index()
        hits = index.search_words("countdown", 5)
        hit = next(h for h in hits if h.metadata["path"] == "src/launch.py")
        meta = hit.metadata
        assert meta["language"] == "python" and meta["symbol"].startswith(
            "launch"
        )  # src/ is layout
        lines = CODE.split("\n")[meta["line_start"] - 1 : meta["line_end"]]
        assert "\n".join(lines) == hit.text  # the range is exactly the chunk's text
        assert hit.text.startswith(("import", "class", "def"))  # whole lines, indentation kept
        prose = next(h for h in index.search_words("kerosene", 5) if h.metadata["ext"] == ".md")
        assert prose.metadata["line_start"] == 1 and "symbol" not in prose.metadata
        vector = embedder.embed(["countdown"])[0]
        assert all("line_start" in h.metadata for h in index.search_vector(vector, 10))
    finally:
        index.close()


def test_turning_syntax_chunks_off_recuts_code_files_only(database, project, embedder):
    (project / "src" / "launch.py").write_text(CODE)
    first = _index(database, project, embedder)
    try:
        first.index()
    finally:
        first.close()
    again = _index(database, project, embedder, syntax_chunks=False)
    try:
        stats = again.index()
        # The three .py files were cut by syntax; now they get line windows. Prose stays.
        assert stats.updated == 3 and stats.added == 0
        db = sqlite3.connect(database)
        chunkers = dict(db.execute("SELECT relpath, chunker FROM rag_file_chunking"))
        db.close()
        assert set(chunkers.values()) == {"lines", "converted:markdown:1"}
        hit = next(h for h in again.search_words("countdown", 5))
        assert "symbol" not in hit.metadata and "line_start" in hit.metadata
        assert again.index().updated == 0  # and only once
    finally:
        again.close()


def test_an_index_from_before_line_ranges_is_cut_again(database, project, embedder):
    index = _index(database, project, embedder)
    try:
        index.index()
        # What an index written by schema version 3 looks like: no line rows at all.
        with index._db:
            index._db.execute("DELETE FROM rag_chunk_lines")
            index._db.execute("DELETE FROM rag_file_chunking")
        stats = index.index()
        assert stats.unchanged == 0 and stats.updated > 0
        hits = index.search_words("rocket", 5)
        assert hits and all("line_start" in h.metadata for h in hits)
    finally:
        index.close()


SHIPS = (
    "class CargoManifest:\n    def tally(self, crates):\n        return sum(crates)\n\n"
    "    def seal(self):\n        return True\n"
)


def test_a_method_is_found_by_its_class_name_and_embedded_with_it(database, project):
    from kairox.default_plugins.hashing_embedder import HashingEmbedder

    (project / "src" / "ships.py").write_text(SHIPS)
    embedder = HashingEmbedder()
    index = _index(database, project, embedder)
    try:
        index.index()
        # "cargo manifest" is only in the class's name, on a line the method's chunk
        # does not hold: the chunk's context (symbol path, class header) is searched.
        hit = index.search_words("cargo manifest seal", 1)[0]
        assert hit.metadata["symbol"] == "ships.CargoManifest.seal"
        assert hit.text == "    def seal(self):\n        return True"  # the text is the file's
        vectors = {v.text: v.vector for v in index.iter_chunk_vectors()}
        context = "ships.CargoManifest.seal (cargo manifest)\nclass CargoManifest:"
        expected = embedder.embed([f"{context}\n{hit.text}"])[0]
        # The pack stores float16: each component within its rounding.
        assert vectors[hit.text] == pytest.approx(expected, abs=1e-3)
    finally:
        index.close()


def test_an_index_of_schema_4_gets_contexts_and_keeps_its_words(database, project, embedder):
    index = _index(database, project, embedder)
    index.index()
    index.close()
    # Back to the layout of version 4: no context column, a two-column FTS table.
    db = sqlite3.connect(database)
    db.executescript(
        "DROP TRIGGER rag_chunks_ai; DROP TRIGGER rag_chunks_ad; DROP TABLE rag_chunks_fts;"
        "ALTER TABLE rag_chunks DROP COLUMN context;"
        "ALTER TABLE rag_chunk_lines DROP COLUMN labels; DROP TABLE rag_failed_files;"
        "CREATE VIRTUAL TABLE rag_chunks_fts USING fts5(relpath, text, content='rag_chunks',"
        " content_rowid='id');"
        "UPDATE kairox_schema SET version = 4 WHERE component = 'workspace_index';"
        "UPDATE rag_file_chunking SET chunker = 'syntax:python:2' WHERE chunker LIKE 'syntax:%';"
    )
    db.close()
    again = _index(database, project, embedder)
    try:
        assert [h.metadata["path"] for h in again.search_words("tomatoes", 3)] == [
            "notes/garden.txt"
        ]  # the FTS table was rebuilt from the rows
        again.index()  # code files are cut again (new chunker version) with their context
        db = sqlite3.connect(database)
        contexts = dict(db.execute("SELECT relpath, context FROM rag_chunks"))
        db.close()
        assert contexts["src/orbit.py"].startswith("orbit.orbital_period")
        assert contexts["notes/garden.txt"] == ""
    finally:
        again.close()
