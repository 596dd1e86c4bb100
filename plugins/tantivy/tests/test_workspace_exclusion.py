"""A tantivy knowledge base's ``index_dir`` inside the workspace is never indexed as
workspace files: the kind declares it through its schema (``TantivyConfig.own_paths``)."""

from __future__ import annotations

import json
import os

from kairox.testing.processes import kairox_process


def test_an_index_dir_inside_the_workspace_is_not_indexed(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.notes]\nkind = "tantivy"\nindex_dir = "kb-index"\n'
    )
    (workspace / "docs").mkdir()
    (workspace / "docs" / "rocket.md").write_text("The rocket engine burns liquid oxygen.\n")
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
        "KAIROX_HOME": str(tmp_path / "state"),
    }
    env.pop("KAIROX_LOAD_PLUGINS", None)
    ingest = kairox_process("kb", "ingest", "notes", "docs", cwd=workspace, env=env)
    assert ingest.returncode == 0, ingest.stderr
    assert (workspace / "kb-index" / "meta.json").is_file()
    indexed = kairox_process("index", "--json", cwd=workspace, env=env)
    assert indexed.returncode == 0, indexed.stderr
    # kairox.toml and docs/rocket.md; nothing of kb-index/ (meta.json would be a third)
    assert json.loads(indexed.stdout)["added"] == 2
    found = kairox_process(
        "search", "segments meta", "--json", "--source", "workspace-fts", cwd=workspace, env=env
    )
    assert found.returncode == 0, found.stderr
    uris = [hit["uri"] for hit in json.loads(found.stdout)["hits"]]
    assert not [uri for uri in uris if "kb-index" in uri], uris
