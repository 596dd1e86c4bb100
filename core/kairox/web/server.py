"""Listening sockets for ``kairox serve`` and the tests (shared with ``kairox mcp``).

The socket is bound (and listening) before the URL is printed or a browser is opened, so
the address is known even for port 0 and nothing can connect before the server is there
to queue it. The code lives in :mod:`kairox.support.listening`.
"""

from __future__ import annotations

from kairox.support.listening import bind_socket

__all__ = ["bind_socket"]
