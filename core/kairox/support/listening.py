"""Where Kairox's servers may listen, and the token rule they share.

``kairox serve`` (the memory browser) and ``kairox mcp --http`` (the MCP server) both act on
memories that steer every future session, so both follow one rule: loopback needs no login,
any other address needs a long random token. The listening socket is bound before a URL is
printed, so the address is known even for port 0.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from typing import Final

from kairox.support.errors import KairoxError

__all__ = [
    "MIN_TOKEN_LENGTH",
    "ServeError",
    "bind_socket",
    "check_bind",
    "is_loopback",
    "is_wildcard",
    "same_secret",
]

# A token guards memories that steer every future session; a short one can be guessed.
MIN_TOKEN_LENGTH: Final = 16


class ServeError(KairoxError):
    """A server cannot start as asked (no token on a network address, port taken, bad origin)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1`` or ``localhost``).

    Any other name counts as non-loopback: a hostname may resolve to a network address.
    """
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` means "every interface" (``0.0.0.0``, ``::`` or empty)."""
    name = host.strip().strip("[]")
    if not name:
        return True
    try:
        return ipaddress.ip_address(name).is_unspecified
    except ValueError:
        return False


def check_bind(host: str, token: str | None, *, token_env: str = "KAIROX_SERVE_TOKEN") -> None:
    """Refuse to listen on a network address without a token, or with a guessable one."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ServeError(
            f"the token is too short ({len(token)} characters; at least {MIN_TOKEN_LENGTH}). "
            'Make one with: python -c "import secrets; print(secrets.token_urlsafe(24))"'
        )
    if token is None and not is_loopback(host):
        raise ServeError(
            f"refusing to serve on {host!r} without a token: anyone who can reach that address "
            "could read and approve your memories. Pass --token (or set "
            f"{token_env}) to a long random string, or bind to 127.0.0.1 (the default)."
        )


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time equality of two secrets (so response timing leaks nothing)."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


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
