"""Hand a ``kairox search`` or ``kairox context`` to a running daemon, standard library only.

:func:`forward` returns what the daemon printed (to be written out byte for byte) or
``None`` when the command must run in-process: no daemon, a stale socket, a daemon that
serves another environment, or one that died before answering.
"""

from __future__ import annotations

import os
import socket
import sys

from kairox.daemon import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONNECT_TIMEOUT = 2.0
#: Seconds a forwarded command may take before the client runs it itself
#: (``KAIROX_DAEMON_TIMEOUT`` overrides it).
REPLY_TIMEOUT = 60.0
TIMEOUT_ENV = "KAIROX_DAEMON_TIMEOUT"


class Answer:
    """What the daemon's run of the command printed, and its exit status."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, exit_code: int, stdout: bytes, stderr: bytes) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


def forwardable(argv: list[str]) -> bool:
    """Whether ``argv`` (without the program name) is a command the daemon answers."""
    if os.environ.get(protocol.NO_DAEMON_ENV):
        return False
    _config, rest = protocol.split_global(argv)
    if not rest or rest[0] not in protocol.FORWARDED:
        return False
    return not protocol.NOT_FORWARDED.intersection(rest)


def _stream(stream: Any) -> dict[str, Any]:
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return {
        "tty": bool(tty),
        "encoding": getattr(stream, "encoding", None) or "utf-8",
        "errors": getattr(stream, "errors", None) or "strict",
    }


def _terminal_size() -> list[int] | None:
    # Where rich looks when it sizes a console: stdin, stdout, then stderr.
    for fd in (0, 1, 2):
        try:
            size = os.get_terminal_size(fd)
        except (AttributeError, ValueError, OSError):
            continue
        return [size.columns, size.lines]
    return None


def request(argv: list[str]) -> dict[str, Any]:
    """The request for ``argv`` run from here, with what the output's terminal looks like."""
    cwd = os.getcwd()
    return {
        "op": "run",
        "argv": protocol.absolute_paths(argv, cwd),
        "cwd": cwd,
        "env": protocol.state_env(),
        "display_env": {k: os.environ[k] for k in protocol.DISPLAY_ENV if k in os.environ},
        "stdout": _stream(sys.stdout),
        "stderr": _stream(sys.stderr),
        "terminal_size": _terminal_size(),
    }


def connect() -> socket.socket | None:
    """A connection to this user's daemon, or ``None`` (none runs, or it is not safe)."""
    path = protocol.socket_path()
    try:
        protocol.check_owned(os.path.dirname(path), socket_file=False)
        protocol.check_owned(path, socket_file=True)
    except FileNotFoundError:
        return None
    except protocol.DaemonUnsafe as exc:
        print(f"warning: not using the kairox daemon: {exc}", file=sys.stderr)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        sock.connect(path)
    except OSError:  # a socket left behind by a daemon that is gone
        sock.close()
        return None
    uid = protocol.peer_uid(sock)
    if uid is not None and uid != os.getuid():
        sock.close()
        print(
            f"warning: not using the kairox daemon: {path} is served by uid {uid}, not you",
            file=sys.stderr,
        )
        return None
    return sock


def call(
    message: dict[str, Any], *, timeout: float | None = None, raise_timeout: bool = False
) -> dict[str, Any] | None:
    """Send one message to the daemon and return its reply (``None``: no daemon, or no
    complete reply; with ``raise_timeout``, a reply not in within ``timeout`` raises
    :class:`TimeoutError` instead)."""
    sock = connect()
    if sock is None:
        return None
    try:
        sock.settimeout(timeout)
        protocol.send(sock, message)
        return protocol.receive(sock)
    except TimeoutError:
        if raise_timeout:
            raise
        return None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def reply_timeout() -> float:
    """How long to wait for a forwarded command's reply, from ``KAIROX_DAEMON_TIMEOUT``."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return REPLY_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        print(
            f"warning: {TIMEOUT_ENV}={raw!r} is not a number of seconds above 0; "
            f"waiting {REPLY_TIMEOUT:g} s for the daemon",
            file=sys.stderr,
        )
        return REPLY_TIMEOUT
    return seconds


def forward(argv: list[str]) -> Answer | None:
    """The daemon's answer to ``argv``, or ``None`` to run it in-process."""
    import base64

    timeout = reply_timeout()
    try:
        reply = call(request(argv), timeout=timeout, raise_timeout=True)
    except TimeoutError:
        # A daemon stuck on something must not hang the user's command: these
        # commands only read, so running it here as well is safe.
        print(
            f"warning: the kairox daemon did not answer within {timeout:g} s "
            f"(set {TIMEOUT_ENV} to wait longer); running the command here",
            file=sys.stderr,
        )
        return None
    if reply is None or reply.get("status") != "done":
        return None
    return Answer(
        int(reply["exit"]),
        base64.b64decode(reply["stdout"]),
        base64.b64decode(reply["stderr"]),
    )
