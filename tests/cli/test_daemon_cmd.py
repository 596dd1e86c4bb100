"""``kairox daemon``: a real daemon process answering real ``kairox`` processes.

Latency figures are the one thing two runs of a search never share, so outputs are
compared with them masked; everything else must match byte for byte.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kairox.daemon import client, protocol

_LATENCY = re.compile(rb"(\d+ ms\b|\"latency_ms\": [0-9.]+)")

FILES = {
    "uploads.md": "# Uploads\n\nFailed uploads retry three times with exponential backoff.\n",
    "retries.md": "# Retries\n\nEvery retry waits twice as long as the one before.\n",
    "src/upload.py": "def upload(path):\n    '''Send one file; retried on failure.'''\n",
}
COMMANDS = [
    ["search", "upload retry"],
    ["search", "upload retry", "--json"],
    ["search", "upload retry", "-k", "1", "--source", "workspace-fts"],
    ["context", "how do uploads retry?"],
    ["context", "how do uploads retry?", "--json"],
    ["search"],  # a usage error: exit 2 and click's message on stderr
    ["search", "x", "--source", "nowhere"],  # refused by the command itself
]


def kairox(
    *args: str, env: dict[str, str] | None = None, **options: object
) -> subprocess.CompletedProcess[bytes]:
    """``kairox ARGS`` as its own process, through the console script's entry."""
    return subprocess.run(
        [sys.executable, "-m", "kairox", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        timeout=120,
        **options,
    )


def in_process(*args: str) -> subprocess.CompletedProcess[bytes]:
    return kairox(*args, env={protocol.NO_DAEMON_ENV: "1"})


def masked(data: bytes) -> bytes:
    return _LATENCY.sub(b"<latency>", data)


def served() -> int:
    reply = client.call({"op": "status"}, timeout=30)
    assert reply is not None, "the daemon does not answer"
    return int(reply["served"])


@pytest.fixture
def indexed(workspace: Path) -> Path:
    for name, text in FILES.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)
    done = in_process("index")
    assert done.returncode == 0, done.stderr
    return workspace


@pytest.fixture
def start_daemon(indexed: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``start_daemon(env=...)``: a ``kairox daemon run`` process, returned once it listens."""
    started: list[subprocess.Popen[str]] = []

    def start(env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "kairox", "daemon", "run"],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until it listens (or dies)
        assert line.startswith("kairox daemon listening on"), process.stderr.read()
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_the_daemon_prints_what_the_command_prints_in_process(start_daemon, args):
    expected = in_process(*args)
    start_daemon()
    before = served()
    got = kairox(*args)
    assert served() == before + 1  # the daemon answered, not a fallback
    assert got.returncode == expected.returncode
    assert masked(got.stdout) == masked(expected.stdout)
    assert masked(got.stderr) == masked(expected.stderr)


def test_the_daemon_renders_for_the_clients_terminal(start_daemon):
    env = {"COLUMNS": "70", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    expected = kairox("search", "upload retry", env={**env, protocol.NO_DAEMON_ENV: "1"})
    assert b"\x1b[" in expected.stdout  # colour, as asked for
    start_daemon()
    before = served()
    got = kairox("search", "upload retry", env=env)
    assert served() == before + 1
    assert masked(got.stdout) == masked(expected.stdout)


def test_a_daemon_killed_mid_request_leaves_the_answer_to_the_client(start_daemon):
    args = ("search", "upload retry", "--json")
    expected = in_process(*args)
    daemon = start_daemon(env={"KAIROX_DAEMON_TEST_HOLD": "1"})
    asking = subprocess.Popen(
        [sys.executable, "-m", "kairox", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert daemon.stdout is not None
    assert daemon.stdout.readline() == "holding\n"  # the request is in, unanswered
    daemon.kill()
    daemon.wait(timeout=60)
    out, err = asking.communicate(timeout=120)
    assert asking.returncode == expected.returncode == 0
    assert masked(out) == masked(expected.stdout)
    assert masked(err) == masked(expected.stderr)


def holding_daemon(start_daemon) -> tuple[subprocess.Popen[str], subprocess.Popen[bytes]]:
    """A daemon stuck inside the command a first client sent it (which waits on)."""
    daemon = start_daemon(env={"KAIROX_DAEMON_TEST_HOLD": "1"})
    first = subprocess.Popen(
        [sys.executable, "-m", "kairox", "search", "upload retry"],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert daemon.stdout is not None
    assert daemon.stdout.readline() == "holding\n"
    return daemon, first


def test_a_daemon_that_does_not_answer_in_time_leaves_the_answer_to_the_client(start_daemon):
    args = ("search", "upload retry", "--json")
    expected = in_process(*args)
    daemon = start_daemon(env={"KAIROX_DAEMON_TEST_HOLD": "1"})
    got = kairox(*args, env={client.TIMEOUT_ENV: "1"})  # the daemon holds it for ever
    daemon.kill()
    assert got.returncode == expected.returncode == 0
    assert masked(got.stdout) == masked(expected.stdout)
    warning = b"warning: the kairox daemon did not answer within 1 s"
    assert got.stderr.startswith(warning), got.stderr
    assert masked(got.stderr.split(b"\n", 1)[1]) == masked(expected.stderr)


def test_a_busy_daemon_sends_a_second_client_to_run_its_own_command(start_daemon):
    expected = in_process("search", "upload retry")
    daemon, first = holding_daemon(start_daemon)
    before = served()
    got = kairox("search", "upload retry")  # waits for the lock, then is told to go
    assert served() == before
    assert got.returncode == expected.returncode == 0
    assert masked(got.stdout) == masked(expected.stdout)
    assert masked(got.stderr) == masked(expected.stderr)  # no warning: a reply came
    daemon.kill()
    out, _err = first.communicate(timeout=120)
    assert first.returncode == 0
    assert masked(out) == masked(expected.stdout)


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf"])
def test_a_bad_reply_timeout_is_named_and_the_default_used(monkeypatch, capsys, value):
    monkeypatch.setenv(client.TIMEOUT_ENV, value)
    assert client.reply_timeout() == client.REPLY_TIMEOUT
    assert f"{client.TIMEOUT_ENV}={value!r} is not a number of seconds" in capsys.readouterr().err


def test_a_client_with_another_environment_runs_the_command_itself(start_daemon):
    start_daemon()
    before = served()
    got = kairox("search", "upload retry", env={"KAIROX_LOAD_PLUGINS": "none"})
    assert got.returncode == 0, got.stderr
    assert served() == before  # not answered by a daemon started without that variable


def test_an_edited_config_and_a_new_index_are_seen_at_once(start_daemon, indexed):
    (indexed / "kairox.toml").write_text("[workspace]\nvectors = true\n")  # both retrievers
    assert in_process("index").returncode == 0
    start_daemon()
    first = kairox("search", "upload retry", "--json")
    assert b'"source": "workspace"' in first.stdout
    (indexed / "kairox.toml").write_text(
        '[workspace]\nvectors = true\ndisabled_retrievers = ["workspace"]\n'
    )
    (indexed / "quota.md").write_text("# Quota\n\nUploads over the quota are refused.\n")
    assert in_process("index").returncode == 0
    before = served()
    got = kairox("search", "quota upload", "--json")
    expected = in_process("search", "quota upload", "--json")
    assert served() == before + 1
    assert masked(got.stdout) == masked(expected.stdout)
    assert b"quota.md" in got.stdout
    assert b'"source": "workspace"' not in got.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_socket_owned_by_another_user_is_refused(start_daemon):
    expected = in_process("search", "upload retry")
    start_daemon()
    before = served()
    path = protocol.socket_path()
    os.chown(path, 65534, 65534)
    try:
        got = kairox("search", "upload retry")
    finally:
        os.chown(path, 0, 0)
    assert served() == before
    assert b"owned by uid 65534, not by you" in got.stderr
    assert masked(got.stdout) == masked(expected.stdout)


def test_the_socket_and_its_folder_are_the_users_alone(start_daemon):
    start_daemon()
    assert os.stat(protocol.run_dir()).st_mode & 0o777 == 0o700
    assert os.stat(protocol.socket_path()).st_mode & 0o777 == 0o600


def test_a_folder_others_can_reach_is_refused(start_daemon):
    start_daemon()
    os.chmod(protocol.run_dir(), 0o755)
    got = kairox("search", "upload retry")
    assert b"can be reached by other users (mode 755)" in got.stderr
    assert got.returncode == 0


def test_status_and_stop(start_daemon):
    none = kairox("daemon", "status")
    assert none.returncode == 1
    assert b"no kairox daemon runs" in none.stdout
    daemon = start_daemon()
    running = kairox("daemon", "status")
    assert running.returncode == 0
    assert f"pid {daemon.pid}".encode() in running.stdout
    stopped = kairox("daemon", "stop")
    assert f"stopped the kairox daemon (pid {daemon.pid})".encode() in stopped.stdout
    assert daemon.wait(timeout=60) == 0
    assert not os.path.exists(protocol.socket_path())


def test_a_second_daemon_is_refused_and_a_stale_socket_replaced(start_daemon):
    daemon = start_daemon()
    second = kairox("daemon", "run", "--no-warm-up")
    assert second.returncode == 1
    assert f"a kairox daemon already runs (pid {daemon.pid})".encode() in second.stderr
    daemon.kill()  # leaves its socket behind
    daemon.wait(timeout=60)
    assert os.path.exists(protocol.socket_path())
    assert in_process("search", "upload retry").returncode == 0
    assert kairox("search", "upload retry").returncode == 0  # a stale socket: in-process
    start_daemon()
    assert served() == 0


def test_forwarding_imports_no_cli_library(start_daemon):
    start_daemon()
    probe = (
        "import sys; from kairox import __main__ as launcher; sys.argv = ['kairox', 'search', 'upload'];"
        "code = launcher.main();"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'click', 'rich', 'pydantic'}),"
        " file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(b"[]\n")
