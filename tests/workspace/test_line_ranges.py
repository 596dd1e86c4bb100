"""Workspace hits carry line ranges and symbols; a file is cut again when its chunker changes."""

from __future__ import annotations

import sqlite3

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
        assert meta["language"] == "python" and meta["symbol"].startswith("launch")  # src/ is layout
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
        assert set(chunkers.values()) == {"lines"}
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
