"""What the tests of a ``sqlite-fts`` knowledge base's vectors share: a tiny embedder
that knows synonyms, a source built with it, and looks into its files."""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np

from kairox.default_plugins import sqlite_fts
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.default_plugins.sqlite_vector_keys import DIGEST
from kairox.retrieval import Document
from kairox.runtime.ingest import ingest
from kairox.testing import build_source

#: Words that mean one thing, for an embedder that knows synonyms and FTS5 does not.
CONCEPTS = {
    "car": 0, "automobile": 0, "vehicle": 0,
    "doctor": 1, "physician": 1,
    "ocean": 2, "sea": 2,
    "happy": 3, "glad": 3,
}  # fmt: skip


class ConceptEmbedder:
    """A real (if tiny) embedding backend: words map to concepts, the rest is hashed."""

    name = "concepts-test"
    dim = 64

    def __init__(self) -> None:
        self.embedded: list[str] = []
        self._hashing = HashingEmbedder(dim=self.dim - len(set(CONCEPTS.values())))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        rest = self._hashing.embed(list(texts))
        concepts = np.zeros((len(texts), len(set(CONCEPTS.values()))), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                if word in CONCEPTS:
                    concepts[row, CONCEPTS[word]] += 3.0
        return np.hstack([concepts, rest]).astype(np.float32)


def build(tmp_path, embedder, path="kb.db", **options):
    return build_source(
        sqlite_fts,
        "sqlite-fts",
        base_dir=tmp_path,
        embedders={embedder.name: embedder},
        path=path,
        embedding_backend=embedder.name,
        **options,
    )


DOCS = [
    Document("d1", "The physician examined the patient's lungs.", title="Clinic"),
    Document("d2", "Waves crashed on the shore of the sea.", title="Coast"),
    Document("d3", "She drove her car to work. Traffic was heavy.", title="Commute"),
]


def passages(count: int, start: int = 0) -> str:
    """JSONL records of ``count`` passages of two sentences (the second repeats every 7)."""
    topics = ["sea waves", "car traffic", "physician clinic", "glad ending", "forest trail"]
    return "\n".join(
        f'{{"id": "p{n}", "text": "Note {n} on {topics[n % 5]}. Line {n % 7} of it."}}'
        for n in range(start, start + count)
    )


def two_sentences(count: int) -> str:
    """JSONL records of passages of two sentences long enough to get vectors of their own
    (the second one repeats every 7 passages)."""
    topics = ["sea waves", "car traffic", "physician clinic", "glad ending", "forest trail"]
    return "\n".join(
        f'{{"id": "p{n}", "text": "Note {n} tells about the {topics[n % 5]} near the old '
        f'harbour. Line {n % 7} of this note was written by somebody else entirely."}}'
        for n in range(count)
    )


def ingest_passages(source, tmp_path, records: str, *, prune: bool = False) -> None:
    """Ingest ``records`` (JSONL) from the file ``docs.jsonl``."""
    path = tmp_path / "docs.jsonl"
    path.write_text(records)
    ingest(source, [path], root=tmp_path, prune=prune)


def pack_files(tmp_path) -> list[str]:
    return sorted(p.name.split(".", 1)[1] for p in (tmp_path / "kb.db.vectors").iterdir())


def waiting_rows(source) -> int:
    """Vectors waiting in the database (not yet in the pack)."""
    return source._open()._db.execute("SELECT count(*) FROM kb_embeddings").fetchone()[0]


# The tables as the code before wrote them (a row a sentence, hex hashes).
MAIN_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_passages (id TEXT PRIMARY KEY, text_hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kb_sentences (id TEXT NOT NULL, sentence_index INTEGER NOT NULL,"
    " text_hash TEXT NOT NULL, PRIMARY KEY (id, sentence_index))",
    "CREATE INDEX IF NOT EXISTS kb_sentences_hash ON kb_sentences(text_hash)",
)


def as_main_layout(path) -> None:
    """Rewrite a knowledge base's ``kb_texts`` as the rows the code before wrote (its
    packs, waiting vectors and documents are alike in both layouts)."""
    db = apsw.Connection(str(path))
    with db:
        for statement in MAIN_SCHEMA:
            db.execute(statement)
        rows = db.execute("SELECT id, passage, sentences FROM kb_texts").fetchall()
        for doc_id, passage, sentences in rows:
            db.execute("INSERT INTO kb_passages VALUES (?, ?)", (doc_id, passage.hex()))
            db.executemany(
                "INSERT INTO kb_sentences VALUES (?, ?, ?)",
                [
                    (doc_id, n, sentences[n * DIGEST : (n + 1) * DIGEST].hex())
                    for n in range(len(sentences) // DIGEST)
                ],
            )
        db.execute("DROP TABLE kb_texts")
    db.close()
