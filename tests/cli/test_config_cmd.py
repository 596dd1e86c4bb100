"""``kairox config check``: the profile x source matrix and configuration errors."""

from __future__ import annotations

import json
from pathlib import Path

VISIBILITY = Path(__file__).parents[1] / "config" / "data" / "visibility.toml"


def write(workspace, text):
    path = workspace / "kairox.toml"
    path.write_text(text)
    return path


def test_defaults_without_any_file(invoke):
    result = invoke("config", "check", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["files"] == []
    assert [p["name"] for p in report["profiles"]] == ["default"]


def test_matrix_of_profiles_and_sources(invoke, workspace):
    # The scenario of kairox.config.schema's visibility test, as the command shows it.
    write(workspace, VISIBILITY.read_text())
    result = invoke("config", "check", "--json")
    assert result.exit_code == 0, result.output
    matrix = {
        (m["profile"], m["source"]): m["visible"] for m in json.loads(result.output)["matrix"]
    }
    assert matrix[("fast", "fast_by_alias")] is True
    assert matrix[("default", "fast_by_alias")] is False
    assert matrix[("default", "everyone")] is matrix[("fast", "everyone")] is True

    table = invoke("config", "check")
    assert table.exit_code == 0
    assert "fast_by_alias" in table.output and "fast" in table.output


def test_misspelt_key_exits_2_naming_file_table_key_and_fix(invoke, workspace):
    path = write(
        workspace,
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "p.db"\n'
        'profile_alias = ["default"]\n',
    )
    result = invoke("config", "check")
    assert result.exit_code == 2
    for part in (str(path), "knowledge_bases.papers", "profile_alias", "profile_aliases"):
        assert part in result.output, f"{part!r} missing from:\n{result.output}"


def test_missing_plugin_names_the_package_to_install(invoke, workspace):
    write(workspace, '[knowledge_bases.code]\nkind = "tantivy"\nindex_dir = "idx"\n')
    result = invoke("config", "check", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    [source] = [s for s in report["sources"] if s["id"] == "code"]
    assert source["installed"] is False
    assert "kairox install kairox-tantivy" in source["problem"]
    assert any("kairox-tantivy" in p for p in report["problems"])


def test_explicit_config_path(invoke, tmp_path):
    other = tmp_path / "elsewhere.toml"
    other.write_text('[profiles.tiny]\nmodel = "m"\ncontext_window = 8192\nheadroom = 512\n')
    result = invoke("--config", str(other), "config", "check", "--json")
    assert result.exit_code == 0, result.output
    assert "tiny" in [p["name"] for p in json.loads(result.output)["profiles"]]
    missing = invoke("--config", str(tmp_path / "nope.toml"), "config", "check")
    assert missing.exit_code == 2
    assert "nope.toml" in missing.output


def test_config_path_that_is_not_a_regular_file_is_refused(kairox_process):
    # /dev/zero would be read forever: refused before reading, in a real process.
    result = kairox_process("--config", "/dev/zero", "config", "check")
    assert result.returncode == 2, result.stderr
    assert "/dev/zero: is not a regular file" in result.stderr


def test_toml_syntax_error_exits_2(invoke, workspace):
    write(workspace, "[profiles.default\nmodel = 1\n")
    result = invoke("config", "check")
    assert result.exit_code == 2
    assert "kairox.toml" in result.output


def test_a_missing_embedding_backend_names_the_package_to_install(kairox_process, workspace):
    # No entry-point plugins load, so kairox-sentence-transformers is as good as missing.
    write(workspace, '[workspace]\nembedding_backend = "minilm"\n')
    result = kairox_process("index", ".", env={"KAIROX_LOAD_PLUGINS": ""})
    assert result.returncode == 2, result.stderr
    flat = " ".join(result.stderr.split())
    assert "minilm is provided by kairox-sentence-transformers" in flat
    assert "kairox install kairox-sentence-transformers" in flat
