"""Precomputed minilm vectors for ``kairox bench scale --embedder minilm-cached``.

Embedding a million passages and their sentences with MiniLM takes hours on two cores;
what the scale benchmark measures is the knowledge base that stores and searches them.
So the source corpus (round 0 of :mod:`kairox.bench.scale_corpus`: each passage as the
knowledge base embeds it, its sentences, and the source's queries) is embedded once
with a real backend (``minilm-int8`` by default) and cached; every text of a perturbed
round then gets its source text's vector plus small deterministic noise
(:mod:`kairox.bench.cached_embedder`, the backend the ``kb ingest`` child uses).

The cache is an ``.npz`` (texts as one JSON string, vectors as float16) named by the
source's and the backend's name, in a folder of the caller's choosing (never the
repository).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from kairox.bench.scale_corpus import source_passages
from kairox.default_plugins.sqlite_vectors import passage_text
from kairox.plugin_host.manager import get_plugin_manager
from kairox.retrieval.documents import Document
from kairox.retrieval.vectors import EMBED_BATCH, embed_unit
from kairox.workspace.chunking import split_sentences

__all__ = ["CACHED_BACKEND", "base_texts", "cache_file", "embed_source", "load_cache"]

#: The real backend whose vectors are cached (what a minilm-int8 knowledge base stores).
CACHED_BACKEND = "minilm-int8"


def base_texts(source: Path) -> list[str]:
    """Every text a knowledge base of the source's passages embeds (each passage as
    :func:`~kairox.default_plugins.sqlite_vectors.passage_text` makes it, and its
    sentences), then the source's queries; each once, in order."""
    texts: dict[str, None] = {}
    for doc_id, title, text in source_passages(source):
        texts[passage_text(Document(id=doc_id, title=title, text=text))] = None
        found = split_sentences(text)
        if len(found) > 1:
            texts.update((sentence.text, None) for sentence in found)
    queries = source / "queries.jsonl" if source.is_dir() else source.with_name("queries.jsonl")
    if queries.is_file():
        with queries.open(encoding="utf-8") as handle:
            texts.update((json.loads(line)["text"], None) for line in handle if line.strip())
    return list(texts)


def cache_file(folder: Path, source: Path, backend: str = CACHED_BACKEND) -> Path:
    """Where the vectors of ``source``'s texts by ``backend`` are cached in ``folder``."""
    name = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:12]
    return folder / f"scale-vectors-{backend}-{name}.npz"


def embed_source(source: Path, out: Path, backend: str = CACHED_BACKEND) -> Path:
    """Embed :func:`base_texts` of ``source`` with ``backend`` into ``out`` (kept when
    it exists: the cache)."""
    if out.is_file():
        return out
    texts = base_texts(source)
    embedder = get_plugin_manager().registry.embedding_backends[backend].factory()
    vectors = np.empty((len(texts), embedder.dim), dtype=np.float16)
    # Batches of texts of alike lengths: a batch is padded to its longest text (a
    # passage among sentences would make every sentence cost a passage).
    by_length = np.argsort([len(text) for text in texts], kind="stable")
    for start in range(0, len(texts), EMBED_BATCH):
        batch = by_length[start : start + EMBED_BATCH]
        vectors[batch] = embed_unit(embedder, [texts[n] for n in batch])
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial.npz")
    np.savez(partial, texts=np.array(json.dumps(texts)), vectors=vectors)
    partial.replace(out)
    return out


def load_cache(path: Path) -> tuple[list[str], np.ndarray]:
    """The cached texts and their (unit, float16) vectors."""
    with np.load(path, allow_pickle=False) as cached:
        return json.loads(str(cached["texts"])), cached["vectors"]
