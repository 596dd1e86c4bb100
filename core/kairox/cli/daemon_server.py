"""The daemon's server: warm facades that run forwarded commands exactly as the CLI would.

A request (:mod:`kairox.daemon.client`) carries a ``kairox`` argv, the client's folder,
its Kairox environment and what its terminal looks like. The server runs the very click
command the client would have run, on a facade kept warm for that workspace, with the
output consoles rebuilt for the client's terminal, and returns the bytes printed. So the
answer is the in-process answer, byte for byte; anything it cannot reproduce (another
environment, a command that crashed) is answered "fallback" and the client runs it.

Commands run one at a time: they print through the process-wide consoles and
``sys.stdout``. Each request refreshes its facade first, so an edited ``kairox.toml`` is
reloaded, and the workspace index and knowledge bases see a re-index on their own
(SQLite's ``data_version``, Tantivy's reload on commit).
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import socket
import socketserver
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kairox.cli import app as cli_app
from kairox.cli.app import AppContext
from kairox.daemon import client, protocol
from kairox.support.errors import KairoxError
from kairox.support.paths import private_folder

#: Warm facades kept at once (one per workspace; the least recently used is closed).
MAX_FACADES = 4
#: Test hook: when set, the daemon prints ``holding`` on its stdout when a command arrives
#: and never answers it, so a test can kill it mid-request at a known point.
HOLD_ENV = "KAIROX_DAEMON_TEST_HOLD"
#: Seconds a command waits for the one running before it to finish, then falls back.
BUSY_WAIT_S = 5.0


class DaemonError(KairoxError):
    """The daemon cannot start or be reached; the message says why and what to do."""


@dataclass
class _WarmApp(AppContext):
    """An invocation's context whose facade is the daemon's warm one (never closed here)."""

    warm: Any = None

    def facade(self, cwd: Path | None = None) -> Any:
        return self.warm if cwd is None else super().facade(cwd)


class _Capture(io.TextIOWrapper):
    """A text stream into bytes that is a terminal exactly when the client's stream is."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(
            io.BytesIO(), encoding=spec["encoding"], errors=spec["errors"], write_through=True
        )
        self._tty = bool(spec["tty"])

    def isatty(self) -> bool:
        return self._tty

    def data(self) -> bytes:
        self.flush()
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue()


@contextlib.contextmanager
def _client_consoles(out: _Capture, err: _Capture, request: dict[str, Any]) -> Iterator[None]:
    """Make the CLI's two consoles what the client's process would have built."""
    environ = dict(request.get("display_env") or {})
    size = request.get("terminal_size") or [0, 0]
    saved = [(target, dict(target.__dict__)) for target in (cli_app.console, cli_app.console_err)]
    try:
        for target, file in ((cli_app.console, out), (cli_app.console_err, err)):
            fresh = cli_app._console(stderr=target.stderr, file=file, environ=environ)
            if not fresh.is_dumb_terminal:
                # Rich sizes a console from the process's own terminal; this one is the
                # client's (its COLUMNS and LINES already count, as they would there).
                fresh._width = fresh._width if fresh._width is not None else (size[0] or 80)
                fresh._height = fresh._height if fresh._height is not None else (size[1] or 25)
            target.__dict__.clear()
            target.__dict__.update(fresh.__dict__)
        yield
    finally:
        for target, state in saved:
            target.__dict__.clear()
            target.__dict__.update(state)


def _exit_code(code: Any, err: _Capture) -> int:
    """The status ``sys.exit(code)`` ends a process with (a message goes to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


def workspace_key(cwd: Path, config: str | None) -> str:
    """Which facade serves a client in ``cwd``: its config file, else its folder."""
    from kairox.config.schema import find_workspace_config

    if config is not None:
        return str(Path(os.path.abspath(cwd / Path(config).expanduser())))
    found = find_workspace_config(cwd)
    return str(found) if found is not None else f"{cwd}{os.sep}"


@dataclass
class Daemon:
    """The warm state and the request handling of one daemon process."""

    pm: Any
    #: :func:`kairox.cli.build_cli` (the root group's ``build``), to serve the same commands
    build_cli: Callable[..., Any]
    started: float = field(default_factory=time.time)
    served: int = 0
    env: dict[str, str] = field(default_factory=protocol.state_env)
    _facades: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    _run_lock: threading.Lock = field(default_factory=threading.Lock)
    _current: Any = None
    _cli: Any = None

    def facade(self, cwd: Path, config: str | None) -> Any:
        """The warm facade for a client in ``cwd`` (built on first use, then kept)."""
        from kairox.runtime.facade import AppFacade

        key = workspace_key(cwd, config)
        made = self._facades.pop(key, None)
        if made is None:
            config_path = Path(config) if config is not None else None
            made = AppFacade(cwd=cwd, config_path=config_path, pm=self.pm)
        self._facades[key] = made
        while len(self._facades) > MAX_FACADES:
            _old, evicted = self._facades.popitem(last=False)
            evicted.close()
        return made

    def warm_up(self, cwd: Path, config: str | None) -> None:
        """Build the sources (and load their models) of the daemon's own workspace."""
        facade = self.facade(cwd, config)
        with contextlib.suppress(Exception):  # a broken setup is reported per command
            facade.search_sync("kairox", k=1)

    def close(self) -> None:
        while self._facades:
            _key, facade = self._facades.popitem()
            facade.close()

    def cli(self) -> Any:
        if self._cli is None:

            def app(config_path: Path | None) -> AppContext:
                return _WarmApp(config_path=config_path, pm=self.pm, warm=self._current)

            self._cli = self.build_cli(self.pm, app=app)
        return self._cli

    def status(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "pid": os.getpid(),
            "started": self.started,
            "served": self.served,
            "workspaces": list(self._facades),
        }

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one forwarded command; ``fallback`` when the client must run it itself."""
        if request.get("env") != self.env:
            return {"status": "fallback", "reason": "the daemon runs with another environment"}
        argv = [str(a) for a in request["argv"]]
        config, rest = protocol.split_global(argv)
        if not rest or rest[0] not in protocol.FORWARDED:
            return {"status": "fallback", "reason": "not a command the daemon answers"}
        # Commands run one at a time (each owns the process's stdout and consoles); a
        # client that would wait long for another's command is better off running its own.
        if not self._run_lock.acquire(timeout=BUSY_WAIT_S):
            return {"status": "fallback", "reason": "the daemon is busy with another command"}
        try:
            return self._run_locked(request, argv, config)
        finally:
            self._run_lock.release()

    def _run_locked(
        self, request: dict[str, Any], argv: list[str], config: str | None
    ) -> dict[str, Any]:
        if os.environ.get(HOLD_ENV):
            print("holding", flush=True)
            threading.Event().wait()
        out, err = _Capture(request["stdout"]), _Capture(request["stderr"])
        try:
            facade = self.facade(Path(request["cwd"]), config)
            facade.refresh()
        except Exception:  # the client's own run reports it, in its own words
            return {"status": "fallback", "reason": "the configuration did not load"}
        self._current = facade
        try:
            with (
                _client_consoles(out, err, request),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
            ):
                try:
                    self.cli().main(args=argv, prog_name="kairox", standalone_mode=True)
                    code = 0
                except SystemExit as exc:
                    code = _exit_code(exc.code, err)
        except Exception:  # a crash prints a traceback: let the client's run print it
            return {"status": "fallback", "reason": "the command failed in the daemon"}
        finally:
            self._current = None
        self.served += 1
        return {
            "status": "done",
            "exit": code,
            "stdout": base64.b64encode(out.data()).decode(),
            "stderr": base64.b64encode(err.data()).decode(),
        }


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        uid = protocol.peer_uid(sock)
        if uid is not None and uid != os.getuid():
            return  # another user's process: say nothing
        message = protocol.receive(sock)
        if message is None:
            return
        op = message.get("op")
        if op == "run":
            reply = self.server.daemon.run(message)
        elif op == "status":
            reply = self.server.daemon.status()
        elif op == "stop":
            reply = {"status": "stopping", "pid": os.getpid()}
        else:
            reply = {"status": "error", "reason": f"unknown op {op!r}"}
        with contextlib.suppress(OSError):
            protocol.send(sock, reply)
        if op == "stop":  # after the reply: the process may end as soon as serving stops
            threading.Thread(target=self.server.shutdown, daemon=True).start()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, daemon: Daemon) -> None:
        self.daemon = daemon
        super().__init__(str(path), _Handler, bind_and_activate=False)

    def server_bind(self) -> None:
        # Created owner-only (umask), then made so explicitly: no moment of a wider mode.
        old = os.umask(0o177)
        try:
            super().server_bind()
        finally:
            os.umask(old)
        os.chmod(self.server_address, 0o600)


def prepare_run_dir() -> Path:
    """``$KAIROX_HOME/run`` made (mode 0700) and checked; the socket path in it, free."""
    folder = Path(protocol.run_dir())
    private_folder(folder.parent)  # $KAIROX_HOME, owner-only like all of Kairox's state
    # Made 0700 if missing, never widened or tightened here: a run/ folder others can
    # reach is refused below, as someone may have tampered with it.
    folder.mkdir(exist_ok=True, mode=0o700)
    try:
        protocol.check_owned(str(folder), socket_file=False)
    except protocol.DaemonUnsafe as exc:
        raise DaemonError(f"cannot start the daemon: {exc}") from None
    path = Path(protocol.socket_path())
    if path.exists() or path.is_symlink():
        try:
            protocol.check_owned(str(path), socket_file=True)
        except protocol.DaemonUnsafe as exc:
            raise DaemonError(f"cannot start the daemon: {exc}; remove it first") from None
        running = client.call({"op": "status"}, timeout=5)
        if running is not None:
            raise DaemonError(
                f"a kairox daemon already runs (pid {running.get('pid')}); "
                "`kairox daemon stop` stops it"
            )
        path.unlink()  # left behind by a daemon that is gone
    return path


def serve(daemon: Daemon, *, ready: Any = None) -> None:
    """Listen on the socket until ``kairox daemon stop`` (or a signal); remove it after.

    :param ready: called with the socket's path once clients can connect.
    """
    path = prepare_run_dir()
    server = _Server(path, daemon)
    inode = None
    try:
        server.server_bind()
        inode = os.stat(path).st_ino
        server.server_activate()
        if ready is not None:
            ready(path)
        server.serve_forever()
    finally:
        server.server_close()
        # Only our own socket: a daemon started after us may have taken the path.
        with contextlib.suppress(FileNotFoundError):
            if inode is not None and os.stat(path).st_ino == inode:
                path.unlink()
        daemon.close()
        sys.stdout.flush()
