"""SQLite connections for search indexes that several threads query at the same time.

Kairox's SQLite knowledge bases open their files through :func:`connect`, on apsw (which
carries its own, current SQLite) rather than the standard library's ``sqlite3``, because
of one process-wide setting. By default SQLite keeps memory statistics for the whole
process, and the mutex that guards them is taken by every allocation of every
connection. Queries that the composite retriever runs in parallel threads then take
turns on that mutex: two FTS5 readers on two cores took 2.3x the time of one, slower than
asking them one after the other; with the statistics off they took 1.0x. The setting can
only change while SQLite is not initialised. The standard library's module initialises
its SQLite on import, and that copy is shared with everything else in the process; apsw's
copy is private to apsw, so switching it there touches no one else.

One rule comes with two copies of SQLite in one process: a file must only ever be opened
through one of them. Their POSIX locks are the process's, and neither copy knows about
the other's, so one closing the file can drop locks the other relies on (SQLite's "How
To Corrupt", section 2.2.1). Knowledge-base files belong to apsw; Kairox's own state
database (events, memories, the workspace index) to ``sqlite3``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw

__all__ = ["connect", "enable_wal", "parallel_readers"]

#: How long a connection waits for another one's lock before "database is locked".
BUSY_TIMEOUT_S = 5.0

_lock = threading.Lock()
_configured: bool | None = None


def parallel_readers() -> bool:
    """Switch apsw's SQLite memory statistics off, once per process, if still possible.

    Returns whether they are off. They stay on (and connections still work, only without
    running in parallel) when another part of the process already holds an apsw
    connection: re-initialising SQLite under an open connection is not allowed.
    """
    global _configured
    with _lock:
        if _configured is None:
            _configured = _switch_statistics_off()
        return _configured


def _switch_statistics_off() -> bool:
    if apsw.connections():
        return False  # someone else's apsw connection is open: leave SQLite as it is
    try:
        apsw.shutdown()
        apsw.config(apsw.SQLITE_CONFIG_MEMSTATUS, 0)
    except apsw.Error:
        return False
    finally:
        apsw.initialize()
    return True


def connect(path: Path | str, *, create: bool = False) -> apsw.Connection:
    """Open ``path`` read-write (creating it when ``create``), with a busy timeout.

    :raises apsw.CantOpenError: when the file does not exist and ``create`` is false, or
        cannot be opened.
    """
    parallel_readers()
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    connection = apsw.Connection(str(path), flags=flags)
    # Another process (kairox kb ingest) may be writing: wait for it rather than fail.
    connection.set_busy_timeout(int(BUSY_TIMEOUT_S * 1000))
    return connection


def enable_wal(connection: apsw.Connection) -> None:
    """Put the connection's file in write-ahead-log mode, waiting for other openers.

    Switching a new file needs its exclusive lock, and when two connections ask at the
    same moment SQLite answers "database is locked" at once rather than through the busy
    handler (waiting there could deadlock), so the switch is retried here for up to
    :data:`BUSY_TIMEOUT_S`. A file already in WAL mode is left as it is.

    :raises apsw.BusyError: when the file stayed locked for the whole timeout.
    :raises apsw.Error: when the file is not a database.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
