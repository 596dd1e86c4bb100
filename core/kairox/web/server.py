"""Listening sockets for ``kairox serve`` and the tests.

The socket is bound (and listening) before the URL is printed or a browser is opened, so
the address is known even for port 0 and nothing can connect before the server is there
to queue it.
"""

from __future__ import annotations

import socket

from kairox.web.security import ServeError

__all__ = ["bind_socket"]


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (``0``: any free port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        # Restarting right after a stop should not fail on a socket in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
            "is another server using the port? Try --port 0 for a free one"
        ) from None
    return sock
