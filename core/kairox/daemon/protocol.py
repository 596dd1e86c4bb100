"""Where the daemon's socket lives, who may use it, and how a message is framed.

Standard library only, and the cheap part of it (no pathlib, typing or dataclasses: see
:mod:`kairox.daemon`). A message is a 4-byte big-endian length and that many bytes of
UTF-8 JSON.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Subcommands a running daemon answers; everything else always runs in-process.
FORWARDED = frozenset({"search", "context"})
#: Options that print help or the version: cheap in-process, and their layout follows the
#: terminal click sees, so they are never forwarded.
NOT_FORWARDED = frozenset({"-h", "--help", "--version"})
#: Options of forwarded commands that name a folder: sent absolute, since the daemon
#: runs the command in its own current folder.
PATH_OPTIONS = ("--workspace",)
#: Environment variables a request carries for the output's terminal (rich reads them).
DISPLAY_ENV = (
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "COLUMNS",
    "LINES",
)
#: Environment variables besides ``KAIROX_*`` that change which config and state a command
#: sees; the daemon answers only clients whose values equal its own.
STATE_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
#: ``KAIROX_*`` variables about the daemon itself, not the answer.
OWN_ENV_PREFIXES = ("KAIROX_DAEMON_", "KAIROX_NO_DAEMON")
#: Set to anything non-empty: never talk to a daemon (benchmarks, debugging).
NO_DAEMON_ENV = "KAIROX_NO_DAEMON"

_LENGTH = struct.Struct(">I")
MAX_MESSAGE = 256 * 1024 * 1024


class DaemonUnsafe(Exception):
    """The socket or its folder is not this user's alone; the message says what is wrong."""


def kairox_home() -> str:
    """:func:`kairox.support.paths.kairox_home`, repeated here so the client needs no other module."""
    explicit = os.environ.get("KAIROX_HOME")
    if explicit:
        return os.path.expanduser(explicit)
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(os.path.expanduser(data_home), "kairox")


def run_dir() -> str:
    """``$KAIROX_HOME/run``: the daemon's folder, mode 0700."""
    return os.path.join(kairox_home(), "run")


def socket_path() -> str:
    """``$KAIROX_HOME/run/daemon.sock``."""
    return os.path.join(run_dir(), "daemon.sock")


def state_env(environ: Any = None) -> dict[str, str]:
    """The variables that must agree between a client and the daemon answering it."""
    environ = os.environ if environ is None else environ
    return {
        key: value
        for key, value in environ.items()
        if (key.startswith("KAIROX_") and not key.startswith(OWN_ENV_PREFIXES)) or key in STATE_ENV
    }


def check_owned(path: str, *, socket_file: bool) -> None:
    """Raise :class:`DaemonUnsafe` unless ``path`` belongs to this user alone: a folder
    with mode 0700 or a socket nobody else owns."""
    info = os.lstat(path)
    uid = os.getuid()
    if info.st_uid != uid:
        raise DaemonUnsafe(f"{path} is owned by uid {info.st_uid}, not by you (uid {uid})")
    if socket_file:
        if not stat.S_ISSOCK(info.st_mode):
            raise DaemonUnsafe(f"{path} is not a socket")
    elif not stat.S_ISDIR(info.st_mode):
        raise DaemonUnsafe(f"{path} is not a folder")
    elif info.st_mode & 0o077:
        raise DaemonUnsafe(
            f"{path} can be reached by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run `chmod 700 {path}`"
        )


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux ``SO_PEERCRED``), else ``None``."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - not Linux
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))
    return uid


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)


def receive(sock: socket.socket) -> dict[str, Any] | None:
    """The next message, or ``None`` if the other end closed before sending all of it."""
    header = _read(sock, _LENGTH.size)
    if header is None:
        return None
    (length,) = _LENGTH.unpack(header)
    if length > MAX_MESSAGE:
        return None
    body = _read(sock, length)
    return None if body is None else json.loads(body)


def _read(sock: socket.socket, size: int) -> bytes | None:
    parts = []
    while size:
        part = sock.recv(min(size, 1 << 20))
        if not part:
            return None
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def split_global(argv: list[str]) -> tuple[str | None, list[str]]:
    """``(--config value, the rest)`` of a ``kairox`` argv whose global options come first."""
    config = None
    rest = list(argv)
    while rest:
        head = rest[0]
        if head == "--config" and len(rest) > 1:
            config, rest = rest[1], rest[2:]
        elif head.startswith("--config="):
            config, rest = head.removeprefix("--config="), rest[1:]
        else:
            break
    return config, rest


def absolute_paths(argv: list[str], cwd: str) -> list[str]:
    """``argv`` with the value of each :data:`PATH_OPTIONS` option made absolute from ``cwd``."""
    out = list(argv)
    for i, arg in enumerate(out):
        for option in PATH_OPTIONS:
            if arg == option and i + 1 < len(out):
                out[i + 1] = os.path.join(cwd, os.path.expanduser(out[i + 1]))
            elif arg.startswith(option + "="):
                value = os.path.expanduser(arg.removeprefix(option + "="))
                out[i] = f"{option}={os.path.join(cwd, value)}"
    return out
