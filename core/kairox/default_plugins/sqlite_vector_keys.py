"""Which texts each passage of a ``sqlite-fts`` knowledge base has vectors of: one row a passage.

``kb_texts`` holds, for each document id, the 32-byte SHA-256 digest of the text its
passage vector embeds and, as one BLOB, the digests of its sentences in order (empty when
it has none): about 32 bytes a sentence, where a row per sentence with a 64-character hex
hash and an index on it took 150-200. Nothing needs a sentence's passages by its hash:
the hashes a pack must keep are read by splitting the BLOBs in SQL (:data:`REFERENCED`),
and a pack's index arrays are made by looking each digest up in the pack's sorted hashes
(:func:`arrange`).

Knowledge bases written before (``kb_passages`` and a row per sentence in
``kb_sentences``) are converted when first opened, in one transaction that changes
nothing else: no vector is embedded again, and the pack's arrays stay valid (the same
documents, in the same order).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable

import apsw
import numpy as np

from kairox.store.sqlite import immediate_transaction
from kairox.workspace.vector_pack import VectorPack

__all__ = ["DIGEST", "REFERENCED", "SCHEMA", "arrange", "digest", "prepare_split", "upgrade"]

#: Bytes of a text's digest.
DIGEST = 32

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_texts (id TEXT PRIMARY KEY, passage BLOB NOT NULL,"
    " sentences BLOB NOT NULL) WITHOUT ROWID",
)

#: Every text hash a passage or a sentence refers to, once, as the hex the waiting rows
#: (``kb_embeddings``) are keyed by; ``temp.kb_counter`` numbers a passage's sentences
#: (:func:`prepare_split` first).
REFERENCED = (
    "SELECT lower(hex(passage)) AS text_hash FROM kb_texts UNION "
    f"SELECT lower(hex(substr(t.sentences, {DIGEST} * n.i + 1, {DIGEST}))) FROM kb_texts t "
    f"JOIN temp.kb_counter n ON n.i < length(t.sentences) / {DIGEST}"
)

# The layout before: a row a passage and a row a sentence, hex hashes, an index by hash.
_OLD_TABLES = ("kb_sentences", "kb_passages")
_FROM_OLD = (
    "INSERT OR REPLACE INTO kb_texts SELECT p.id, unhex(p.text_hash), coalesce(("
    "SELECT unhex(group_concat(s.text_hash, '' ORDER BY s.sentence_index)) FROM kb_sentences s "
    "WHERE s.id = p.id), x'') FROM kb_passages p"
)

# Passages arranged at a time.
_BLOCK = 4096


def digest(text: str) -> bytes:
    """The digest of ``text`` a vector is addressed by."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _has_old_layout(db: apsw.Connection) -> bool:
    marks = ", ".join("?" * len(_OLD_TABLES))
    found = db.execute(
        f"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ({marks})",
        _OLD_TABLES,
    ).fetchone()[0]
    return bool(found)


def upgrade(db: apsw.Connection) -> bool:
    """Convert a knowledge base of the layout before (a row a sentence) in place, in one
    transaction (its write lock taken only when there is something to convert); whether
    it did. Outside any transaction."""
    if not _has_old_layout(db):
        return False
    with immediate_transaction(db):
        if not _has_old_layout(db):  # another process converted it meanwhile
            return False
        for statement in SCHEMA:
            db.execute(statement)
        db.execute(_FROM_OLD)
        for table in _OLD_TABLES:
            db.execute(f"DROP TABLE {table}")  # with its indexes
    return True


def prepare_split(db: apsw.Connection) -> None:
    """Make ``temp.kb_counter`` number as many sentences as a passage has, for
    :data:`REFERENCED`."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS kb_counter (i INTEGER PRIMARY KEY)")
    most = db.execute(f"SELECT coalesce(max(length(sentences)), 0) / {DIGEST} FROM kb_texts")
    db.execute(
        "INSERT OR IGNORE INTO temp.kb_counter WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL "
        "SELECT i + 1 FROM c WHERE i + 1 < ?) SELECT i FROM c",
        (most.fetchone()[0],),
    )


def arrange(
    db: apsw.Connection, rows_of: Callable[[np.ndarray], np.ndarray], vectors: np.ndarray
) -> VectorPack:
    """A pack's index arrays: the passages (by document rowid) and sentences whose vector
    ``rows_of`` finds (it maps ``S32`` digests to rows of ``vectors``, -1 when missing),
    read a block of passages at a time. Rows and owners are int32 where they fit (as the
    pack stores them): at a million passages the sentences' are tens of millions."""
    ids, chunk_rows, owners, sentence_rows = [], [], [], []
    kept = 0
    cursor = db.execute(
        "SELECT d.rowid, t.passage, t.sentences FROM kb_texts t JOIN documents d ON d.id = t.id "
        "ORDER BY d.rowid"
    )
    while block := list(itertools.islice(cursor, _BLOCK)):
        rowids = np.fromiter((row[0] for row in block), dtype=np.int64, count=len(block))
        passages = rows_of(np.frombuffer(b"".join(row[1] for row in block), dtype=f"S{DIGEST}"))
        has = passages >= 0
        counts = np.fromiter((len(row[2]) // DIGEST for row in block), np.int64, len(block))
        sentences = rows_of(np.frombuffer(b"".join(row[2] for row in block), f"S{DIGEST}"))
        # A sentence belongs to the position of its passage among those kept.
        position = np.repeat(kept + np.cumsum(has) - 1, counts)
        owned = np.repeat(has, counts) & (sentences >= 0)
        ids.append(rowids[has])
        chunk_rows.append(_narrow(passages[has]))
        owners.append(_narrow(position[owned]))
        sentence_rows.append(_narrow(sentences[owned]))
        kept += int(has.sum())
    return VectorPack(
        ids=_joined(ids),
        chunk_rows=_joined(chunk_rows),
        owners=_joined(owners),
        sentence_rows=_joined(sentence_rows),
        vectors=vectors,
    )


def _narrow(values: np.ndarray) -> np.ndarray:
    """Non-negative row numbers as int32 when they fit."""
    return values.astype(np.int32) if not len(values) or values.max() < 2**31 else values


def _joined(blocks: list[np.ndarray]) -> np.ndarray:
    """The blocks as one array, each let go once copied (one array's worth extra, not
    the whole list's)."""
    joined = np.concatenate(blocks) if blocks else np.empty(0, dtype=np.int64)
    blocks.clear()
    return joined
