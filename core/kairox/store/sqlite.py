"""The SQLite plumbing every Kairox store shares: opening the state database, versions, transactions.

Events, memories, the workspace index and the sync journal live in one file
(``$KAIROX_HOME/kairox.db``). So that each part can evolve its own tables, versions are
tracked twice:

* ``PRAGMA user_version`` holds the version of the shared layout (:data:`DATABASE_FORMAT_VERSION`:
  the pragmas and the ``kairox_schema`` bookkeeping table);
* ``kairox_schema(component, version)`` holds one version per component (``events``, ``memory``,
  ...), managed by :func:`ensure_component_schema`.

A database written by a newer Kairox (either number higher than this code knows) is refused with
:class:`SchemaVersionError` instead of being read or written with the wrong assumptions.

Every connection runs in WAL mode with a busy timeout and autocommit, and every write is one short
transaction, so two processes (say, the TUI and the web app) can share the file and see each
other's writes on their next read. :class:`Database` is one such connection that several stores
share, so that writes to two of them (a memory and its event) commit in one transaction.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol

from kairox.support.closing import ClosedOnExit
from kairox.support.paths import SQLITE_COMPANIONS, private_file, private_folder, state_errors

__all__ = [
    "DATABASE_FORMAT_VERSION",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "ClosedOnExit",
    "Database",
    "SchemaVersionError",
    "SqliteComponentStore",
    "connect_database",
    "enable_wal",
    "ensure_component_schema",
    "immediate_transaction",
    "utc_now",
    "where_equal",
]

DATABASE_FORMAT_VERSION: Final = 1
"""``PRAGMA user_version`` this code writes and understands."""

DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000


class SchemaVersionError(RuntimeError):
    """The database was written by a newer Kairox than this one."""


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (the default clock of the stores)."""
    return datetime.now(UTC)


def connect_database(
    path: str | PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """Open the Kairox database with the settings every store relies on.

    Autocommit (transactions are explicit and short), WAL so readers never block the writer,
    and a busy timeout so two processes wait for each other instead of failing.
    Also checks ``PRAGMA user_version``: a newer layout raises :class:`SchemaVersionError`.
    """
    target = str(path)
    with state_errors(target):
        if target != ":memory:" and not target.startswith("file:"):
            # Memories and events: owner-only, the -wal and -shm files too (kairox.support.paths).
            private_folder(Path(target).parent)
            private_file(target, companions=SQLITE_COMPANIONS)
        conn = sqlite3.connect(
            target,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
            uri=target.startswith("file:"),
        )
    try:
        with state_errors(target):
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Check before switching to WAL, so a newer database is refused untouched.
            _check_format(conn)
            enable_wal(conn, busy_timeout_ms / 1000)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _check_format(conn: sqlite3.Connection) -> int:
    (found,) = conn.execute("PRAGMA user_version").fetchone()
    if found > DATABASE_FORMAT_VERSION:
        raise SchemaVersionError(
            f"this database has layout version {found}, newer than the {DATABASE_FORMAT_VERSION} "
            "this Kairox understands; upgrade Kairox (it was left untouched)"
        )
    return found


def enable_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the connection's file to write-ahead logging, waiting for other openers.

    Switching needs the file's exclusive lock, and when another connection is opening the
    same new file SQLite answers "database is locked" at once instead of through the busy
    handler (waiting there could deadlock), so the switch is retried for up to
    ``timeout_s`` seconds. A file already in WAL mode is left as it is.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


class _Connection(Protocol):
    """What :func:`immediate_transaction` needs: a sqlite3 or an apsw connection."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, statement: str, /) -> object: ...


@contextmanager
def immediate_transaction(conn: _Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; ``ROLLBACK`` when the block (or the commit) fails.

    IMMEDIATE takes the write lock up front, so a read-then-write cannot be overtaken by
    another process, and a second opener of a new file waits out the busy timeout instead
    of failing at once with "database is locked".
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def ensure_component_schema(
    conn: sqlite3.Connection,
    component: str,
    version: int,
    statements: Sequence[str],
    migrations: Mapping[int, Sequence[str]] | None = None,
) -> None:
    """Create ``component``'s tables at ``version`` if missing; refuse a newer stored version.

    ``statements`` must be idempotent (``IF NOT EXISTS``). ``migrations[n]`` upgrades tables
    stored at version ``n - 1`` to version ``n``; an older stored version runs each step up to
    ``version`` in turn, then ``statements``. Everything runs in one ``BEGIN IMMEDIATE``
    transaction, so two processes opening the database cannot interleave and a failed
    upgrade leaves the tables as they were.
    """
    with immediate_transaction(conn):
        if _check_format(conn) < DATABASE_FORMAT_VERSION:
            conn.execute(f"PRAGMA user_version = {DATABASE_FORMAT_VERSION}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS kairox_schema ("
            " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        row = conn.execute(
            "SELECT version FROM kairox_schema WHERE component = ?", (component,)
        ).fetchone()
        if row is not None and row[0] > version:
            raise SchemaVersionError(
                f"the {component!r} tables in this database are version {row[0]}, newer than the "
                f"{version} this Kairox understands; upgrade Kairox (the database was left "
                "untouched)"
            )
        if row is None or row[0] < version:
            if row is not None:
                for step in range(row[0] + 1, version + 1):
                    for statement in (migrations or {}).get(step, ()):
                        conn.execute(statement)
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO kairox_schema(component, version) VALUES (?, ?)"
                " ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                (component, version),
            )


class Database(ClosedOnExit):
    """One connection to the state database, shared by every store opened on it.

    Calls are serialised by :attr:`lock` (re-entrant, so a store method may run inside
    :meth:`transaction`). Stores on one ``Database`` can write together atomically::

        with database.transaction():
            record = memories.put(...)
            events.append(...)   # both commit, or neither
    """

    def __init__(
        self, path: str | PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    ) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.conn = connect_database(path, busy_timeout_ms=busy_timeout_ms)

    def ensure_schema(
        self,
        component: str,
        version: int,
        statements: Sequence[str],
        migrations: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        """:func:`ensure_component_schema` on this connection."""
        with self.lock:
            ensure_component_schema(self.conn, component, version, statements, migrations)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """:func:`immediate_transaction` on this connection; a nested call joins it."""
        with self.lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            with immediate_transaction(self.conn):
                yield self.conn

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class SqliteComponentStore(ClosedOnExit):
    """A store with its own tables in the shared database.

    Subclasses name their ``component``, ``schema_version`` and ``schema`` (idempotent
    statements), and the ``migrations`` from older versions; a database holding a newer
    version of them is refused untouched.

    :param path: the database file, or a :class:`Database` to share (then closing the
        store leaves the connection to its owner).
    """

    component: ClassVar[str]
    schema_version: ClassVar[int]
    schema: ClassVar[Sequence[str]]
    # Upgrades from older stored versions: ``{n: statements taking n - 1 to n}``.
    migrations: ClassVar[Mapping[int, Sequence[str]]] = {}

    def __init__(
        self,
        path: str | PathLike[str] | Database,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._owns_database = not isinstance(path, Database)
        self.database = (
            Database(path, busy_timeout_ms=busy_timeout_ms) if self._owns_database else path
        )
        self.path = self.database.path
        self._clock = clock
        self._lock = self.database.lock
        self._conn = self.database.conn
        try:
            self.database.ensure_schema(
                self.component, self.schema_version, self.schema, self.migrations
            )
        except BaseException:
            if self._owns_database:
                self.database.close()
            raise

    def close(self) -> None:
        """Close the connection (when this store opened it)."""
        if self._owns_database:
            self.database.close()

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read, under the database's lock."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()


def where_equal(**columns: Any) -> tuple[list[str], list[Any]]:
    """``column = ?`` for each of ``columns`` given a value (``None``: no condition), and
    the parameters in the same order; the names are the caller's own column names."""
    given = {name: value for name, value in columns.items() if value is not None}
    return [f"{name} = ?" for name in given], list(given.values())
