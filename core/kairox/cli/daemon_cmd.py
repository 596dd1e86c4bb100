"""``kairox daemon run|status|stop``: a resident process that keeps sources and models warm.

While it runs, ``kairox search`` and ``kairox context`` are answered by it (see
:mod:`kairox.__main__`), with the same output as without it.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import click

from kairox.cli.app import AppContext, console, print_json
from kairox.cli.options import json_option
from kairox.daemon import client, protocol


@click.group()
def daemon() -> None:
    """Keep sources and models warm for `kairox search` and `kairox context`."""


def _stop_on_sigterm() -> None:
    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)  # unwinds serve_forever, which removes the socket

    signal.signal(signal.SIGTERM, stop)


@daemon.command()
@click.option("--no-warm-up", is_flag=True, help="Do not load the workspace's sources first.")
@click.pass_obj
def run(app: AppContext, no_warm_up: bool) -> None:
    """Run the daemon in the foreground (until `kairox daemon stop` or Ctrl-C).

    It serves every workspace its clients are in (the current one is loaded first) with
    the environment it was started with; a client whose KAIROX_* or config location
    variables differ runs its commands itself.
    """
    from kairox.cli.daemon_server import Daemon, prepare_run_dir, serve

    prepare_run_dir()  # refuse early, before loading anything
    # The root group builds the daemon's CLI: this module is one of the root's commands.
    root = click.get_current_context().find_root().command
    warm = Daemon(pm=app.plugin_manager(), build_cli=root.build)  # type: ignore[attr-defined]
    if not no_warm_up:
        config = str(app.config_path) if app.config_path is not None else None
        warm.warm_up(Path.cwd(), config)
    _stop_on_sigterm()

    def ready(path: Path) -> None:
        console.print(f"kairox daemon listening on {path} (pid {warm.status()['pid']})")

    with contextlib.suppress(KeyboardInterrupt):
        serve(warm, ready=ready)
    console.print("kairox daemon stopped", markup=False)


@daemon.command()
@json_option()
def status(as_json: bool) -> None:
    """Say whether a daemon runs for this KAIROX_HOME, and what it serves (exit 1 if none)."""
    reply = client.call({"op": "status"}, timeout=10)
    if as_json:
        print_json(reply or {"status": "not running", "socket": str(protocol.socket_path())})
    elif reply is None:
        console.print(f"no kairox daemon runs ({protocol.socket_path()})", markup=False)
    else:
        up = time.time() - float(reply["started"])
        console.print(
            f"kairox daemon running: pid {reply['pid']}, up {up:.0f} s, "
            f"{reply['served']} commands answered",
            markup=False,
        )
        for workspace in reply["workspaces"]:
            console.print(f"  warm: {workspace}", markup=False)
    if reply is None:
        raise SystemExit(1)


@daemon.command()
def stop() -> None:
    """Stop the running daemon (nothing to do if none runs)."""
    reply = client.call({"op": "stop"}, timeout=10)
    if reply is None:
        console.print("no kairox daemon runs", markup=False)
        return
    console.print(f"stopped the kairox daemon (pid {reply['pid']})", markup=False)
