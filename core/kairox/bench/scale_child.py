"""The ``kairox`` CLI with the scale benchmark's ``minilm-cached`` embedding backend
registered (:mod:`kairox.bench.cached_embedder`): what ``kairox bench scale --embedder
minilm-cached`` runs its ``kb ingest`` child as (``python -m kairox.bench.scale_child kb
ingest ...``), so the backend never becomes a plugin of the installed CLI. At its end
the child writes how many texts it embedded and how many had no source vector."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from kairox.bench.cached_embedder import MADE, STATS_FILE
from kairox.plugin_host.manager import get_plugin_manager

if __name__ == "__main__":
    get_plugin_manager().load_builtins(["kairox.bench.cached_embedder"])
    try:
        # The console script's module, as `python -m kairox` runs it (sys.argv as given).
        runpy.run_module("kairox", run_name="__main__", alter_sys=True)
    finally:
        counts = {
            "texts_embedded": sum(made.embedded for made in MADE),
            "texts_unmatched": sum(made.unmatched for made in MADE),
        }
        Path(STATS_FILE).write_text(json.dumps(counts))
