"""The history benchmark's references: code-aware tokens, whole-file BM25, path and symbols."""

from __future__ import annotations

from kairox.bench.history_refs import PathSymbolRanker, WholeFileBm25, code_tokens, tree_texts


def test_code_tokens_split_identifiers():
    assert code_tokens("parseHTTPHeader_v2(self.max_redirects)") == [
        "parse",
        "http",
        "header",
        "v",
        "2",
        "self",
        "max",
        "redirects",
    ]


TEXTS = {
    "src/auth.py": "def digest_response(nonce):\n    return md5(nonce)\n",
    "src/client.py": "class HttpClient:\n    def send(self, request):\n        pass\n",
    "src/retry_policy.py": "MAX = 3\n",
    "CHANGELOG.md": "Fixed the digest response of the client.\n",
}


def test_whole_file_bm25_ranks_the_file_holding_the_words():
    bm25 = WholeFileBm25(TEXTS)
    assert bm25("digestResponse nonce")[0] == "src/auth.py"
    assert bm25("") == []
    assert "src/retry_policy.py" not in bm25("digest")  # no word of the query: not ranked


def test_path_symbol_matches_path_words_and_defined_names():
    ranker = PathSymbolRanker(TEXTS)
    assert ranker("retry policy") == ["src/retry_policy.py"]
    assert ranker("the http client sends")[0] == "src/client.py"
    # A changelog mentioning the words defines nothing: only its path could match.
    assert "CHANGELOG.md" not in ranker("digest response")
    assert ranker("digest response")[0] == "src/auth.py"


def test_tree_texts_reads_the_text_files_the_walk_takes(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    (tmp_path / "ignored.py").write_text("y = 2\n")
    assert set(tree_texts(tmp_path)) == {"a.py", ".gitignore"}
