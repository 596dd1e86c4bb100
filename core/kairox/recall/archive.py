"""The message archive: every message of a workspace's sessions, indexed for recall.

Each message recorded (a user's, a model's reply, a system message, a tool's output) in the event store gets one row
in ``recall_messages`` keyed by its event id (so nothing is indexed twice), its words in
the FTS5 table ``recall_fts`` and its vector from the workspace's embedder in
``recall_vectors`` (keyed by event id and embedder, so vectors of two models are never
compared). :meth:`MessageArchive.sync` indexes what the event store holds and the index
lacks: a process killed between recording a message and indexing it leaves the index
behind, and the next sync (every search starts with one) catches up.

Why a watermark is enough between syncs: SQLite has one writer at a time, so event ids
become visible in order; a sync indexes every message up to the newest event it saw, in
one transaction, so the indexed ids are always everything up to some id. The first sync
of a process looks at every event (an anti-join), the later ones at newer events only.

The rows of this workspace are also kept in memory (:class:`~kairox.recall.rows.MessageRows`)
for the ranking in :mod:`kairox.recall.search`; they grow with each sync.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Final

import numpy as np

from kairox.recall.rows import ArchivedMessage, MessageRows
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.fts5 import match_terms
from kairox.retrieval.fts5_common import CommonTerms
from kairox.retrieval.stop_words import ENGLISH_STOP_WORDS
from kairox.retrieval.vectors import EMBED_BATCH, embed_unit
from kairox.store.events import SqliteEventStore, StoredEvent
from kairox.store.messages import MESSAGE_EVENTS, recorded_message
from kairox.store.sqlite import Database, SqliteComponentStore

__all__ = ["ArchivedMessage", "MessageArchive", "MessageRows"]

RECALL_SCHEMA_VERSION: Final = 1

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS recall_messages (
        event_id INTEGER PRIMARY KEY,
        workspace_id TEXT,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL,
        speaker TEXT,
        time TEXT NOT NULL,
        text TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS recall_by_session ON recall_messages(workspace_id, session_id)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS recall_fts USING fts5(
        speaker, text, content='recall_messages', content_rowid='event_id',
        tokenize='porter unicode61'
    )""",
    """CREATE TABLE IF NOT EXISTS recall_vectors (
        event_id INTEGER NOT NULL,
        embedder TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (event_id, embedder)
    )""",
)

# The events that record a message (kairox.store.messages), by type name.
_MESSAGE_TYPES: Final = tuple(cls.type for cls in MESSAGE_EVENTS)

#: BM25 weights of the FTS columns (speaker, text): a name in the question is a hint,
#: the words of the message are the evidence.
FTS_WEIGHTS: Final = (0.5, 1.0)


def _archived(
    event_id: int,
    session_id: str,
    workspace_id: str | None,
    created_at: str,
    kind: str,
    payload: str,
) -> ArchivedMessage:
    """The archive's row for one stored message event (read as :mod:`kairox.store.messages` does)."""
    stored = StoredEvent(event_id, session_id, workspace_id, created_at, kind, json.loads(payload))
    recorded = recorded_message(stored)
    assert recorded is not None  # the query asked for message events only
    message = recorded.message
    return ArchivedMessage(
        event_id, session_id, message.role, message.name, recorded.when, message.content
    )


class MessageArchive(SqliteComponentStore):
    """The recall index of one workspace's messages, in the shared state database.

    :param path: the state database (or a :class:`~kairox.store.sqlite.Database` to share).
    :param workspace_id: whose sessions are indexed and searched.
    :param embedder: the workspace's embedding backend.
    """

    component = "recall"
    schema_version = RECALL_SCHEMA_VERSION
    schema = _SCHEMA

    def __init__(
        self, path: str | Path | Database, workspace_id: str, embedder: EmbeddingBackend
    ) -> None:
        super().__init__(path)
        # The archive reads the event log; make sure its tables exist on a fresh database.
        self.database.ensure_schema(
            SqliteEventStore.component, SqliteEventStore.schema_version, SqliteEventStore.schema
        )
        self.workspace_id = workspace_id
        self.embedder = embedder
        self._watermark = 0  # every message event up to this id is indexed
        self._rows = MessageRows(embedder.dim)
        self._common_terms = CommonTerms("recall_fts")
        self._sync_lock = threading.Lock()

    # -- indexing -----------------------------------------------------------------------

    def sync(self) -> int:
        """Index the messages the event store holds and the index lacks; how many were new
        (words and vectors both). Safe to call from several threads and processes; with
        no new event since the last sync it costs one read."""
        with self._sync_lock:
            with self._lock:
                (newest,) = self._conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()
            if newest <= self._watermark:
                return 0
            added = self._index_new_messages(newest)
            self._embed_missing()
            self._load_rows()
            self._watermark = newest
            return added

    def _missing(self, conn: Any, newest: int) -> list[Any]:
        kinds = list(_MESSAGE_TYPES)
        return conn.execute(
            "SELECT e.id, e.session_id, e.workspace_id, e.created_at, e.type, e.payload "
            "FROM events e "
            f"WHERE e.id > ? AND e.id <= ? AND e.workspace_id IS ? "
            f"AND e.type IN ({', '.join('?' * len(kinds))}) "
            "AND NOT EXISTS (SELECT 1 FROM recall_messages m WHERE m.event_id = e.id) "
            "ORDER BY e.id",
            (self._watermark, newest, self.workspace_id, *kinds),
        ).fetchall()

    def _index_new_messages(self, newest: int) -> int:
        with self._lock:
            if not self._missing(self._conn, newest):
                return 0  # nothing to write: no write lock taken
        with self.database.transaction() as conn:
            # Again under the write lock: another process may have indexed them meanwhile.
            messages = [_archived(*row) for row in self._missing(conn, newest)]
            conn.executemany(
                "INSERT INTO recall_messages(event_id, workspace_id, session_id, role, speaker,"
                " time, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (m.event_id, self.workspace_id, m.session_id, m.role, m.speaker, m.time, m.text)
                    for m in messages
                ],
            )
            conn.executemany(
                "INSERT INTO recall_fts(rowid, speaker, text) VALUES (?, ?, ?)",
                [(m.event_id, m.speaker or m.role, m.text) for m in messages],
            )
        return len(messages)

    def _embed_missing(self) -> None:
        rows = self._fetch_all(
            "SELECT m.event_id, m.role, m.speaker, m.text FROM recall_messages m "
            "WHERE m.workspace_id IS ? AND m.event_id > ? AND NOT EXISTS (SELECT 1 FROM "
            "recall_vectors v WHERE v.event_id = m.event_id AND v.embedder = ?) "
            "ORDER BY m.event_id",
            (self.workspace_id, self._rows.last_id, self.embedder.name),
        )
        for start in range(0, len(rows), EMBED_BATCH):
            batch = rows[start : start + EMBED_BATCH]
            texts = [f"{speaker or role}: {text}" for _, role, speaker, text in batch]
            vectors = embed_unit(self.embedder, texts)
            with self.database.transaction() as conn:
                conn.executemany(
                    "INSERT OR IGNORE INTO recall_vectors(event_id, embedder, vector)"
                    " VALUES (?, ?, ?)",
                    [
                        (row[0], self.embedder.name, vector.tobytes())
                        for row, vector in zip(batch, vectors, strict=True)
                    ],
                )

    def _load_rows(self) -> None:
        rows = self._fetch_all(
            "SELECT m.event_id, m.session_id, m.time, m.role, m.speaker, m.text, v.vector "
            "FROM recall_messages m JOIN recall_vectors v ON v.event_id = m.event_id "
            "AND v.embedder = ? WHERE m.workspace_id IS ? AND m.event_id > ? "
            "ORDER BY m.event_id",
            (self.embedder.name, self.workspace_id, self._rows.last_id),
        )
        if not rows:
            return
        messages = [
            ArchivedMessage(event_id, session, role, speaker, time, text)
            for event_id, session, time, role, speaker, text, _ in rows
        ]
        vectors = np.frombuffer(b"".join(row[-1] for row in rows), dtype=np.float32)
        self._rows.add(messages, vectors.reshape(len(rows), self.embedder.dim))

    # -- reading ------------------------------------------------------------------------

    @property
    def rows(self) -> MessageRows:
        """The in-memory rows as of the last :meth:`sync`."""
        return self._rows

    def count(self) -> int:
        """How many messages of this workspace the index holds (words)."""
        with self._lock:
            (found,) = self._conn.execute(
                "SELECT count(*) FROM recall_messages WHERE workspace_id IS ?",
                (self.workspace_id,),
            ).fetchone()
        return int(found)

    def search_words(
        self, text: str, k: int, session_id: str | None = None
    ) -> list[tuple[int, float]]:
        """BM25 (FTS5) over speakers and texts: ``(event_id, score)`` best first, higher
        is better. ``session_id`` keeps one session's messages. Any text is safe.

        The words of ``text`` are asked without English stop words (unless it has no
        other): a question's "what did you" would otherwise rank the short messages made
        of them above the answer (recall@10 0.678 -> 0.713 on LoCoMo's development half).
        """
        terms = match_terms(text, ENGLISH_STOP_WORDS)
        if not terms:
            return []
        where = "m.workspace_id IS ?" + (" AND m.session_id = ?" if session_id else "")
        params: list[Any] = [self.workspace_id] + ([session_id] if session_id else [])

        def ranked(expression: str) -> list[Any]:
            return self._conn.execute(
                "SELECT m.event_id, bm25(recall_fts, ?, ?) AS rank FROM recall_fts "
                "JOIN recall_messages m ON m.event_id = recall_fts.rowid "
                f"WHERE recall_fts MATCH ? AND {where} ORDER BY rank, m.event_id LIMIT ?",
                [*FTS_WEIGHTS, expression, *params, k],
            ).fetchall()

        with self._lock:
            rows = self._common_terms.ranked(self._conn, terms, k, ranked)
        return [(int(event_id), -float(rank)) for event_id, rank in rows]
