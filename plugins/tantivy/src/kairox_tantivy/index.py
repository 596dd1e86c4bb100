"""A Kairox document index on disk, kept by Tantivy (through tantivy-py).

One directory holds one index: Tantivy's files plus ``documents.sqlite``
(:mod:`kairox_tantivy.store`), which holds what hits show. The Tantivy schema stores
nothing:

==============  =========================  ==========================================
field           how                        why
==============  =========================  ==========================================
``id``          raw, indexed               one term per document: delete/replace by id
``key``         u64 fast field             the document's row in ``documents.sqlite``
``title``       ``en_stem``                searched (BM25), boostable
``body``        ``en_stem``                searched (BM25), boostable
``filter``      raw                        one ``"key"=value`` term per scalar metadata value
==============  =========================  ==========================================

An index written before ``key`` existed (every field stored in Tantivy) is rebuilt in
this layout the first time it is opened (:mod:`kairox_tantivy.upgrade`).

User text never reaches Tantivy's query parser. The query is run through the same
analysis ``en_stem`` applies at indexing time (simple tokenizer, drop tokens of 40+ bytes,
lowercase, English Snowball stemmer) and the resulting terms become a boolean SHOULD
query of per-field term queries (:mod:`kairox_tantivy.query`), so ``"``, ``:``, ``(``,
``AND``, ``-``, ``*``, ``^``, ``~`` and ``\\`` are just characters the tokenizer skips, and
``rings`` still finds ``ring``. The schema, the errors and the lazy import of ``tantivy``
are :mod:`kairox_tantivy.engine`'s.

Writers are taken per write call and released before it returns, so an idle index holds no
lock and searching never needs one. ``tantivy`` is imported on first use, never at import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from kairox import Document
from kairox.support.paths import in_kairox_home, private_folder, private_tree
from kairox_tantivy.compact import worth_compacting
from kairox_tantivy.documents import check_id, filter_term, metadata_from_json, metadata_terms
from kairox_tantivy.documents import row as document_row
from kairox_tantivy.engine import (
    WRITER_HEAP_BYTES,
    TantivyIndexError,
    TantivyLockedError,
    build_schema,
    checked_is_file,
    load_tantivy,
)
from kairox_tantivy.filters import RANGE_MARKER, range_terms
from kairox_tantivy.query import MAX_QUERY_TERMS, Boosts, QueryBuilder, query_error
from kairox_tantivy.store import STORE_FILE, DocumentStore, HitRow, Row
from kairox_tantivy.upgrade import is_legacy, recover, upgrade

__all__ = [
    "MAX_QUERY_TERMS",
    "Boosts",
    "IndexHit",
    "TantivyIndex",
    "TantivyIndexError",
    "TantivyLockedError",
    "filter_term",
    "load_tantivy",
    "metadata_from_json",
]


def has_index(folder: Path) -> bool:
    """Whether ``folder`` holds a tantivy index (a ``meta.json``)."""
    recover(folder)  # an interrupted upgrade may have the index in a sibling folder
    return checked_is_file(folder / "meta.json")


def _deleter(writer: Any) -> Any:
    """``delete_documents_by_term`` (tantivy-py 0.25+), else its older name."""
    return getattr(writer, "delete_documents_by_term", None) or writer.delete_documents


@dataclass(slots=True)
class _Batch:
    """One write: the tantivy writer, and what to undo if it does not commit."""

    writer: Any
    undo: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    after_commit: list[Callable[[], None]] = dataclasses.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class IndexHit:
    """One search result as stored: BM25 ``score``, higher is better."""

    id: str
    title: str
    body: str
    uri: str | None
    metadata: dict[str, Any]
    score: float


class TantivyIndex:
    """One Tantivy index directory: add, replace, delete and search documents by id.

    :param path: the index directory.
    :param create: create the directory and an empty index when there is none; without
        it a missing index is a :class:`TantivyIndexError`.
    """

    def __init__(self, path: Path | str, *, create: bool = False) -> None:
        self.path = Path(path)
        tantivy = load_tantivy()
        self._tantivy = tantivy
        self._schema = build_schema(tantivy)
        self._queries = QueryBuilder(tantivy, self._schema, self.path)
        self._write_lock = threading.Lock()
        self._loaded: tuple[tuple[int, ...] | None, float] = (None, 0.0)
        # Inside $KAIROX_HOME the index is Kairox's state: owner-only (kairox.support.paths).
        self._private = in_kairox_home(self.path)
        meta = self.path / "meta.json"
        recover(self.path)  # an upgrade killed half-way: finish or undo its folder swap
        if not checked_is_file(meta):
            if not create:
                raise TantivyIndexError(f"no tantivy index at {self.path} (no meta.json)")
            try:
                if self._private:
                    private_folder(self.path)
                else:
                    self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TantivyIndexError(
                    f"cannot create the index folder {self.path}: {exc}"
                ) from exc
        try:
            if checked_is_file(meta):
                is_compatible = getattr(tantivy.Index, "is_compatible", None)
                if is_compatible is not None and not is_compatible(str(self.path)):
                    raise TantivyIndexError(
                        f"the index at {self.path} was written by an incompatible tantivy "
                        "version; delete the folder and ingest again"
                    )
                index = tantivy.Index.open(str(self.path))
                if index.schema != self._schema:
                    index = self._upgraded(index)
                if index.schema != self._schema:
                    raise TantivyIndexError(
                        f"{self.path} holds a tantivy index with a different schema (not written "
                        "by this version of kairox-tantivy); delete the folder and ingest again"
                    )
                store_exists = checked_is_file(self.path / STORE_FILE)
            else:
                index = tantivy.Index(self._schema, path=str(self.path), reuse=True)
                # A new index: every document it will hold carries range terms.
                (self.path / RANGE_MARKER).touch()
                store_exists = False
            if not store_exists and index.searcher().num_docs > 0:
                raise TantivyIndexError(
                    f"the index at {self.path} has lost its {STORE_FILE} (the text of its "
                    "documents); delete the folder and ingest again"
                )
            self._store = DocumentStore(self.path, create=True)
            # Reload explicitly (after our own commits; before a search when meta.json
            # changed) instead of relying on a file watcher thread: deterministic.
            index.config_reader(reload_policy="Manual")
        except (ValueError, OSError, sqlite3.Error) as exc:
            raise TantivyIndexError(
                f"{self.path} is not a readable tantivy index: {exc}. Check that the folder "
                "and its files can be read and written, or correct `index_dir`."
            ) from exc
        self._index = index
        self._temporaries_cleared = False

    def __repr__(self) -> str:
        return f"TantivyIndex({str(self.path)!r})"

    def _upgraded(self, index: Any) -> Any:
        """``index`` rebuilt in this layout if it is in the one before ``key``, else itself."""
        if not is_legacy(index, self._tantivy):
            return index
        upgrade(self.path, index, self._tantivy, rebuild=TantivyIndex)
        return self._tantivy.Index.open(str(self.path))

    def close(self) -> None:
        """Close the ``documents.sqlite`` writer connection (reads reopen per thread)."""
        self._store.close()

    @property
    def has_range_terms(self) -> bool:
        """Whether every document carries range terms (the index was created with them)."""
        return (self.path / RANGE_MARKER).is_file()

    # -- writing -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _writer(self, *, threads: int = 0) -> Iterator[_Batch]:
        """A writer for one batch: commit on success, roll back on error, always release.

        The batch's ``after_commit`` steps run after the commit and its ``undo`` steps
        after a failed one, both while the writer lock is still held. ``threads`` is
        tantivy's indexing thread count (0: its default); each thread writes its own
        segment per commit.
        """
        with self._write_lock:
            try:
                writer = self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=threads)
            except ValueError as exc:
                if "LockBusy" in str(exc):
                    raise TantivyLockedError(
                        f"the index at {self.path} is being written by another process "
                        "(tantivy writer lock held); wait for it to finish or stop it"
                    ) from exc
                raise TantivyIndexError(f"cannot write to the index at {self.path}: {exc}") from exc
            if not self._temporaries_cleared:
                self._clear_temporaries()
            committed = False
            batch = _Batch(writer)
            try:
                yield batch
                writer.commit()
                committed = True
                for step in batch.after_commit:
                    step()
            finally:
                if not committed:
                    with contextlib.suppress(Exception):
                        writer.rollback()
                    for step in batch.undo:
                        step()
                # Consumes the writer and releases the lock (also waits for merges).
                try:
                    writer.wait_merging_threads()
                except ValueError as exc:
                    if committed:
                        raise TantivyIndexError(
                            f"tantivy failed to finish merging segments in {self.path}: {exc}"
                        ) from exc
                del writer
                if self._private:
                    private_tree(self.path)  # tantivy writes its files with the umask's mode
            self._reload()

    def _clear_temporaries(self) -> None:
        """Delete the ``.tmpXXXX`` files a writer killed mid-write left behind.

        Tantivy writes meta.json and managed.json through a temporary file in the index
        folder and renames it; only a writer does that, so while we hold the writer lock
        no temporary file there belongs to a live process.
        """
        for leftover in self.path.glob(".tmp*"):
            with contextlib.suppress(OSError):
                if leftover.is_file():
                    leftover.unlink()
        self._temporaries_cleared = True

    def _document(self, doc: Document, key: int, title: str, body: str) -> Any:
        out = self._tantivy.Document()
        out.add_text("id", doc.id)
        out.add_unsigned("key", key)
        out.add_text("title", title)
        out.add_text("body", body)
        metadata = dict(doc.metadata)
        for term in [*metadata_terms(metadata), *range_terms(metadata)]:
            out.add_text("filter", term)
        return out

    def upsert(self, documents: Iterable[Document]) -> int:
        """Add or replace documents by id, in one commit. Returns how many were written."""
        latest: dict[str, Document] = {}
        for doc in documents:
            latest[check_id(doc.id)] = doc  # the last copy of an id in a batch wins
        return self._write([(doc, doc.fingerprint) for doc in latest.values()])

    def _write(self, entries: Sequence[tuple[Document, str]]) -> int:
        """Write ``(document, fingerprint)`` pairs (distinct ids) in one commit."""
        if not entries:
            return 0
        rows: list[Row] = [document_row(doc, fp) for doc, fp in entries]
        with self._writer() as batch:
            # Rows first: a committed document always has its row (store.py).
            keys = self._store.add(rows)
            batch.undo.append(lambda: self._store.discard(keys))
            ids = [stored[0] for stored in rows]
            batch.after_commit.append(lambda: self._store.prune(zip(ids, keys, strict=True)))
            delete = _deleter(batch.writer)
            for (doc, _), stored, key in zip(entries, rows, keys, strict=True):
                # A delete applies to documents added before it, so the add survives.
                delete("id", doc.id)
                batch.writer.add_document(self._document(doc, key, stored[1], stored[2]))
        return len(rows)

    def compact(self) -> bool:
        """Rewrite the index as one segment when small segments hold much of it.

        Each commit adds a segment per indexing thread and tantivy merges only past 8,
        while a search pays per segment (SciFact, top 100: 276 us in 5 segments, 147 us
        in one). tantivy-py has no merge call, but every document's text is in
        ``documents.sqlite``: the live documents are re-added, with their keys, in one
        commit by one thread. Only when the segments other than the largest hold at
        least :data:`~kairox_tantivy.compact.SHARE` of the documents, so the rewrites
        cost at most a constant factor of what was written. Returns whether it did.
        """
        if not worth_compacting(self.path):
            return False
        with self._writer(threads=1) as batch:
            self._reload()  # under the lock: nobody else can commit until we do
            self._rewrite(batch)
        return True

    def _rewrite(self, batch: _Batch) -> None:
        """Replace every document through the batch's writer with itself, read back
        from its row."""
        searcher = self._searcher()
        total = searcher.num_docs
        found = searcher.search(self._tantivy.Query.all_query(), limit=max(total, 1), count=False)
        keys = searcher.fast_field_values("key", [address for _score, address in found.hits])
        rows = self._store.documents(keys)
        if len(rows) != len(keys):  # pragma: no cover - a row lost outside kairox
            raise TantivyIndexError(
                f"{len(keys) - len(rows)} documents of {self.path} have no row in its "
                "documents.sqlite; delete the folder and ingest again"
            )
        # Rows a crash left behind (written, never committed) go with the rewrite.
        batch.after_commit.append(lambda: self._store.keep_only(keys))
        batch.writer.delete_all_documents()  # applies to what is committed; adds survive
        for key in keys:
            doc_id, title, body, metadata = rows[key]
            doc = Document(doc_id, body, title=title, metadata=json.loads(metadata))
            batch.writer.add_document(self._document(doc, key, title, body))

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id, in one commit. Returns how many of the ids existed."""
        wanted = list(dict.fromkeys(check_id(i) for i in ids))
        if not wanted:
            return 0
        existing = self._count_ids(wanted)
        if existing:
            with self._writer() as batch:
                batch.after_commit.append(lambda: self._store.remove(wanted))
                delete = _deleter(batch.writer)
                for doc_id in wanted:
                    delete("id", doc_id)
        return existing

    # -- reading -----------------------------------------------------------------------

    def _meta_state(self) -> tuple[int, ...] | None:
        # Every commit (ours or another process's) atomically replaces meta.json.
        try:
            st = (self.path / "meta.json").stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)

    def _reload(self) -> None:
        state = self._meta_state()  # before reloading: a later commit is seen next time
        self._index.reload()
        self._loaded = (state, time.monotonic())

    def _searcher(self) -> Any:
        """A searcher that sees every commit so far, by this or any other process.

        Reloading re-opens the segment list; it is skipped while meta.json is unchanged
        (and at least once a second it happens regardless, to bound any doubt).
        """
        state, when = self._loaded
        if state is None or state != self._meta_state() or time.monotonic() - when >= 1.0:
            self._reload()
        return self._index.searcher()

    def _count_ids(self, ids: Sequence[str]) -> int:
        query = self._tantivy.Query.term_set_query(self._schema, "id", list(ids))
        return self._searcher().search(query, limit=1, count=True).count

    def count(self) -> int:
        """How many documents the index holds."""
        return self._searcher().num_docs

    def fingerprints(self) -> dict[str, str]:
        """Every stored id with the :attr:`Document.fingerprint` it was stored with."""
        searcher = self._searcher()
        total = searcher.num_docs
        if total == 0:
            return {}
        result = searcher.search(self._tantivy.Query.all_query(), limit=total, count=False)
        keys = searcher.fast_field_values("key", [address for _score, address in result.hits])
        return self._store.fingerprints(keys)

    def query_terms(self, text: str) -> list[str]:
        """The distinct ``en_stem`` terms of ``text``, in order (at most MAX_QUERY_TERMS)."""
        return self._queries.terms(text)

    def search_rows(
        self, text: str, k: int, filters: Any = None, **boosts: Unpack[Boosts]
    ) -> list[tuple[float, str, str, str, str | None, dict[str, Any]]]:
        """:meth:`search` as plain ``(score, id, title, body, uri, metadata)`` tuples."""
        return [
            (score, doc_id, title, joined[len(title) + 1 :] if title else joined, uri, meta)
            for score, (doc_id, title, joined, uri, meta) in self.search_stored(
                text, k, filters, **boosts
            )
            for meta in (metadata_from_json(meta),)
        ]

    def search_stored(
        self, text: str, k: int, filters: Any = None, **boosts: Unpack[Boosts]
    ) -> list[tuple[float, HitRow]]:
        """:meth:`search` as ``(score, (id, title, text, uri, metadata JSON))`` pairs,
        ``text`` being ``title + "\n" + body`` (just ``body`` without a title).

        For callers that build their own result objects: the hits' keys come from the
        ``key`` fast field in one call, their rows from ``documents.sqlite`` (or the rows
        kept in memory) in one query, and nothing is built per hit.
        """
        if unknown := boosts.keys() - Boosts.__optional_keys__:
            raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
        if k < 1:
            return []
        query = self._queries.build(text, filters, boosts, has_range_terms=self.has_range_terms)
        if query is None:
            return []
        try:
            scored, rows = self._hits(query, k)
            if None in rows:
                # A writer replaced or deleted some hit after our searcher was opened, and
                # pruned its row: search again on the latest commit.
                self._reload()
                scored, rows = self._hits(query, k)
        except ValueError as exc:
            raise query_error(text, exc) from exc
        pairs = zip(scored, rows, strict=True)
        # A row still missing was deleted by a writer a moment ago.
        return [pair for pair in pairs if pair[1] is not None] if None in rows else list(pairs)

    def _hits(self, query: Any, k: int) -> tuple[list[float], list[HitRow | None]]:
        """The scores of the top ``k`` and their ``documents.sqlite`` rows (or ``None``)."""
        searcher = self._searcher()
        # Never ask for more than exists: tantivy sizes its top-k buffer by the limit.
        limit = min(k, max(searcher.num_docs, 1))
        hits = searcher.search(query, limit=limit, count=False).hits
        keys = searcher.fast_field_values("key", [address for _score, address in hits])
        return [score for score, _address in hits], self._store.hits(keys)

    def search(
        self, text: str, k: int, filters: Any = None, **boosts: Unpack[Boosts]
    ) -> list[IndexHit]:
        """Best first (BM25, higher is better); any string is a valid ``text``.

        Terms are OR-ed over ``title`` and ``body``; filters are equality on metadata,
        a list meaning "any of", different keys all required. A termless query is ``[]``.
        ``boosts`` weigh the fields (:class:`Boosts`).
        """
        rows = self.search_rows(text, k, filters, **boosts)
        return [
            IndexHit(id=i, title=t, body=b, uri=u, metadata=m, score=score)
            for score, i, t, b, u, m in rows
        ]
