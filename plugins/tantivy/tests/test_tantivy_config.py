"""The ``tantivy`` table: where ``index_dir`` resolves, the boosts it accepts, and a
``kairox.toml`` table loaded and built as Kairox does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import kairox_tantivy
import pytest
from pydantic import ValidationError

from kairox.config.errors import ConfigError
from kairox.config.loader import load_config
from kairox.plugin_host.manager import KairoxPluginManager
from kairox.retrieval import Query
from kairox.testing import registered_plugin, run


def test_relative_index_dir_resolves_from_the_config_folder(tmp_path, make_source):
    assert make_source(tmp_path, "sub/idx").path == tmp_path / "sub" / "idx"
    assert make_source(tmp_path, str(tmp_path / "abs")).path == tmp_path / "abs"
    assert make_source(tmp_path, "~/kb").path == Path.home() / "kb"


def test_config_rejects_bad_boosts(make_source, tmp_path):
    with pytest.raises(ValidationError, match="nothing would be searched"):
        make_source(tmp_path, title_boost=0, body_boost=0)
    with pytest.raises(ValidationError):
        make_source(tmp_path, title_boost=-1)
    for value in (float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="finite"):
            make_source(tmp_path, title_boost=value)


def test_a_kairox_toml_table_builds_the_source(tmp_path, monkeypatch, corpus_docs):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kairox.toml").write_text(
        textwrap.dedent(
            """
            [knowledge_bases.papers]
            kind = "tantivy"
            index_dir = "indexes/papers"
            title_boost = 2.0
            timeout_ms = 800
            """
        )
    )
    pm = KairoxPluginManager()
    with registered_plugin(kairox_tantivy, "tantivy", pm):
        config = load_config(cwd=workspace, registry=pm.registry)
        entry = config.knowledge_bases["papers"]
        assert isinstance(entry.config, kairox_tantivy.TantivyConfig)
        kind = pm.registry.knowledge_base_kinds["tantivy"]
        from kairox.plugin_host.registry import BuildContext

        ctx = BuildContext(
            workspace_root=workspace,
            state_dir=tmp_path,
            base_dir=entry.origin.parent,
            embedding_backend=None,
        )
        source = kind.factory("papers", entry.config, ctx)
        assert source.path == workspace / "indexes" / "papers"
        assert source.title_boost == 2.0
        source.upsert(corpus_docs)
        hits = run(source.retrieve(Query("saturn rings ice", k=1)))
        assert [hit.id for hit in hits] == ["astro-1"]

        (workspace / "kairox.toml").write_text(
            '[knowledge_bases.papers]\nkind = "tantivy"\nindex_dri = "x"\n'
        )
        with pytest.raises(ConfigError, match="index_dir"):
            load_config(cwd=workspace, registry=pm.registry)
