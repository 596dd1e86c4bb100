"""The ``sqlite-fts`` knowledge base's BM25 pack (:mod:`kairox.retrieval.bm25_pack`).

Written at the end of an ingest run into ``<index>.words/`` and recorded in the index's
``kb_words_packs`` table; every transaction that changes the documents deletes that
record (:data:`INVALIDATE`), so a search reads the pack only while it matches the table,
and asks FTS5 otherwise (and for filtered searches, and for a term the tokenizer splits
into a phrase). The ranking is FTS5's own, term for term: the same tokenizer, the same
``bm25()``, and the same leaving out of terms that score as nothing
(:mod:`kairox.retrieval.fts5_common`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import apsw

from kairox.retrieval.bm25_pack import Bm25Pack, Weights, read_pack, remove_packs, write_pack
from kairox.retrieval.fts5_postings import read_postings, row_ids

__all__ = ["INVALIDATE", "SCHEMA", "WordsPacks"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_words_packs (token TEXT NOT NULL, "
    "title_weight REAL NOT NULL, body_weight REAL NOT NULL);"
)
#: Run in every transaction that writes the documents.
INVALIDATE = "DELETE FROM kb_words_packs"


class WordsPacks:
    """The pack of one index file: shares the index's connection and lock.

    :param tokenize: the FTS5 table's ``tokenize`` option (``"porter unicode61 ..."``).
    """

    def __init__(self, db: apsw.Connection, lock: threading.Lock, path: Path, tokenize: str):
        self._db = db
        self._lock = lock
        self.folder = path.parent / f"{path.name}.words"
        name, *arguments = tokenize.split()
        self._tokenizer = db.fts5_tokenizer(name, arguments)
        self._loaded: tuple[str, Bm25Pack | None] | None = None

    def _tokens(self, text: str, flags: int) -> list[str]:
        return self._tokenizer(
            text.encode("utf-8"), flags, None, include_offsets=False, include_colocated=False
        )

    def _token(self, weights: Weights) -> str | None:
        """The pack matching the documents, if it was written with ``weights``."""
        row = self._db.execute(
            "SELECT token, title_weight, body_weight FROM kb_words_packs"
        ).fetchone()
        return None if row is None or Weights(row[1], row[2]) != weights else row[0]

    def write(self, weights: Weights) -> bool:
        """Pack the documents with ``weights`` unless such a pack is current and
        readable; whether one was written.

        The postings are FTS5's own (:mod:`kairox.retrieval.fts5_postings`), read in one
        transaction with the documents' rowids, and the token recorded in it: if another
        connection wrote meanwhile, recording fails and the pack is not used.
        """
        if weights.title <= 0 or weights.body <= 0:
            # FTS5 returns a row matched in a column weighted 0 with a score of 0; the
            # pack tells matched rows by a positive score.
            self.remove()
            return False
        with self._lock:
            current = self._token(weights)
            if current is not None and self._pack(current) is not None:
                return False  # (files gone or damaged are written again)
            try:
                with self._db:
                    rowids = row_ids(self._db, "SELECT rowid FROM documents ORDER BY rowid")
                    postings = read_postings(self._db, "documents_fts", "body", rowids)
                    token = write_pack(self.folder, rowids, postings, weights)
                    self._db.execute(INVALIDATE)
                    self._db.execute(
                        "INSERT INTO kb_words_packs VALUES (?, ?, ?)",
                        (token, weights.title, weights.body),
                    )
            except (OSError, ValueError, apsw.BusyError):
                return False  # searches ask FTS5, as without a pack
        remove_packs(self.folder, keep=token)
        return True

    def remove(self) -> None:
        """Forget and delete every pack (``words_pack = false``)."""
        with self._lock, self._db:
            self._db.execute(INVALIDATE)
        remove_packs(self.folder)

    def top(self, terms: Sequence[str], k: int, weights: Weights) -> list[tuple[int, float]] | None:
        """``(rowid, -bm25)`` of the best ``k`` rows for the OR of the quoted ``terms``
        (:func:`kairox.retrieval.fts5.match_terms`), or ``None`` when the pack cannot
        answer (none current with ``weights``, or a term FTS5 would read as a phrase)."""
        with self._lock:
            token = self._token(weights)
            if token is None:
                return None
            phrases = [self._tokens(term[1:-1], apsw.FTS5_TOKENIZE_QUERY) for term in terms]
        if any(len(tokens) != 1 for tokens in phrases):
            return None
        pack = self._pack(token)
        if pack is None:
            return None
        words = [tokens[0] for tokens in phrases]
        # As kairox.retrieval.fts5_common: terms in half the rows or more score 1e-6 an
        # occurrence; leave them out while the others still find k rows.
        informative = [word for word in words if 2 * pack.frequency(word) < pack.rows]
        if informative and len(informative) < len(words):
            best = pack.top(informative, k)
            if len(best) >= k:
                return best
        return pack.top(words, k)

    def _pack(self, token: str) -> Bm25Pack | None:
        loaded = self._loaded
        if loaded is None or loaded[0] != token:
            loaded = (token, read_pack(self.folder, token))
            self._loaded = loaded
        return loaded[1]
