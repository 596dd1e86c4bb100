"""The ``kairox`` CLI with the scale benchmark's ``minilm-cached`` embedding backend
registered (:mod:`kairox.bench.cached_embedder`): what ``kairox bench scale --embedder
minilm-cached`` runs its ``kb ingest`` child as (``python -m kairox.bench.scale_child kb
ingest ...``), so the backend never becomes a plugin of the installed CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kairox.bench.cached_embedder import MADE, STATS_FILE
from kairox.cli import main
from kairox.plugin_host.manager import get_plugin_manager

if __name__ == "__main__":
    get_plugin_manager().load_builtins(["kairox.bench.cached_embedder"])
    try:
        code = main()
    finally:
        counts = {
            "texts_embedded": sum(made.embedded for made in MADE),
            "texts_unmatched": sum(made.unmatched for made in MADE),
        }
        Path(STATS_FILE).write_text(json.dumps(counts))
    sys.exit(code)
