"""Where a tantivy knowledge base's ``index_dir`` lies: inside the workspace it is never
indexed as workspace files (the kind declares it through its schema,
``TantivyConfig.own_paths``); inside ``$KAIROX_HOME`` it is owner-only, as Kairox's state is."""

from __future__ import annotations

import json
import os
import stat
import sys

from kairox.testing.processes import kairox_process, shell_process


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


def test_an_index_dir_inside_kairox_home_is_owner_only(tmp_path):
    # Kairox's state is private whatever the umask; an index_dir there is state too.
    workspace = tmp_path / "workspace"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "docs" / "rocket.md").write_text("The rocket engine burns liquid oxygen.\n")
    home = tmp_path / "state"
    (workspace / "kairox.toml").write_text(
        f'[knowledge_bases.notes]\nkind = "tantivy"\nindex_dir = "{home / "kb" / "notes"}"\n'
    )
    env = {**os.environ, "HOME": str(tmp_path / "home"), "KAIROX_HOME": str(home)}
    env.pop("KAIROX_LOAD_PLUGINS", None)
    ingest = shell_process(
        'umask 022 && exec "$0" -m kairox kb ingest notes docs',
        sys.executable,
        cwd=workspace,
        env=env,
    )
    assert ingest.returncode == 0, ingest.stderr
    index_dir = home / "kb" / "notes"
    assert (index_dir / "meta.json").is_file()
    for path in [home / "kb", index_dir, *index_dir.rglob("*")]:
        expected = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == expected, path
