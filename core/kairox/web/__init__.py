"""The web memory browser behind ``kairox serve``.

A small Starlette application (:func:`create_app`) with one page and a JSON API to list,
search, write, approve, reject, edit and forget memories through the :class:`AppFacade`.
It keeps no copy of any memory: every request reads the shared SQLite store, so edits made
by the CLI, the TUI or another server show on the next request. :mod:`kairox.web.security`
explains who may call it (loopback by default, a token otherwise, same-origin changes only).

Importing this package needs Starlette; the CLI imports it only when ``serve`` runs.
"""

from __future__ import annotations

from kairox.web.app import MAX_BODY_BYTES, create_app
from kairox.web.security import (
    COOKIE_NAME,
    CSRF_HEADER,
    TOKEN_ENV,
    Origin,
    ServeError,
    check_bind,
    is_loopback,
)
from kairox.web.server import bind_socket

__all__ = [
    "COOKIE_NAME",
    "CSRF_HEADER",
    "MAX_BODY_BYTES",
    "TOKEN_ENV",
    "Origin",
    "ServeError",
    "bind_socket",
    "check_bind",
    "create_app",
    "is_loopback",
]
