"""Recall: every message of every session, indexed as it is recorded, searched again.

:mod:`kairox.recall.archive` keeps the index (FTS5 words and the workspace embedder's
vectors, in the state database, keyed by the message's event id);
:mod:`kairox.recall.search` ranks it for a prompt. The session hands the best messages
to the assembler as the ``recall`` context source.
"""

from kairox.recall.archive import MessageArchive
from kairox.recall.rows import ArchivedMessage
from kairox.recall.search import RecallScope, RecallSearch, recall_for, recalled_json

__all__ = [
    "ArchivedMessage",
    "MessageArchive",
    "RecallScope",
    "RecallSearch",
    "recall_for",
    "recalled_json",
]
