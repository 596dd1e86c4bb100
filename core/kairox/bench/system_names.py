"""The retrieval benchmark's built-in systems by name: local kinds, dense aliases, hybrids, hints.

Also what each system imports before its process is forked, so that library code is not
counted as the system's memory.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

from kairox.bench import BENCH_EXTRA
from kairox.bench.peers import PEERS

DENSE_ALIASES = {"dense": "minilm", "hashing": "hashing", "dense-doc": "minilm"}
#: Dense systems that search one vector per document, without sentence vectors.
WHOLE_DOCUMENT_ONLY = frozenset({"dense-doc"})
# Where each local kind keeps its files, relative to a scratch folder.
LOCAL_KIND_OPTIONS = {"sqlite-fts": {"path": "sqlite-fts.db"}, "tantivy": {"index_dir": "tantivy"}}
INSTALL_HINTS = {
    "tantivy": "kairox install kairox-tantivy",
    "minilm": "kairox install kairox-sentence-transformers",
    "rank_bm25": f"{BENCH_EXTRA} (or pip install rank-bm25)",
    "bm25s": f"{BENCH_EXTRA} (or pip install bm25s PyStemmer)",
}

#: The hybrid systems: ``sqlite-fts`` + ``dense`` fused by the composite with these
#: settings. ``hybrid`` passes nothing, so it is whatever ``CompositeWorkspaceRetriever``
#: (and so ``kairox search``) does by default. ``lexical`` holds extra ``sqlite-fts``
#: settings. The ``hybrid-wrrf`` weights and constant and sqlite-fts's default title
#: weight (3; ``hybrid-title1`` shows the old 1) were tuned on SciFact's *train* split
#: (``benchmarks/tune_hybrid.py``).
HYBRIDS: dict[str, dict[str, Any]] = {
    "hybrid": {},
    "hybrid-rrf": {"fusion": "rrf"},
    "hybrid-wrrf": {"fusion": "rrf", "rrf_k": 5, "weights": {"dense": 0.9}},
    "hybrid-minmax": {"fusion": "minmax"},
    "hybrid-dbsf": {"fusion": "dbsf"},
    "hybrid-title1": {"lexical": {"title_weight": 1.0}},
    "hybrid-doc": {"dense": "dense-doc"},
}

#: Imported before a system's process is forked, so that library code is not counted
#: as the system's memory. Keyed by system, peer or embedding backend.
PREIMPORT: dict[str, tuple[str, ...]] = {
    "rank_bm25": ("rank_bm25", "Stemmer"),
    "bm25s": ("bm25s", "Stemmer"),
    "tantivy": ("tantivy",),
    "minilm": ("torch", "sentence_transformers"),
}


def install_hint(name: str) -> str:
    return f" (install it: {INSTALL_HINTS[name]})" if name in INSTALL_HINTS else ""


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def preimport(names: Sequence[str]) -> None:
    wanted: list[str] = []
    for name in names:
        keys = [name]
        if name in HYBRIDS:
            keys = ["dense"]
        if keys[0] in DENSE_ALIASES:
            keys.append(DENSE_ALIASES[keys[0]])
        for key in keys:
            wanted.extend(PREIMPORT.get(key, ()))
    for module in dict.fromkeys(wanted):
        if installed(module):
            importlib.import_module(module)


def peer_missing(name: str) -> str | None:
    """Why peer ``name`` cannot run (with an install hint), or ``None`` when it can."""
    for module in PEERS[name]:
        if not installed(module):
            return f"peer {name!r} is not installed: {INSTALL_HINTS[name]}"
    return None
