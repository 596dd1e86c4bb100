"""kairox.daemon.protocol and the client's choice of what to forward."""

from __future__ import annotations

import os
import socket

import pytest

from kairox.daemon import client, protocol


def test_socket_lives_in_kairox_home(monkeypatch, tmp_path):
    monkeypatch.setenv("KAIROX_HOME", str(tmp_path / "state"))
    assert protocol.socket_path() == str(tmp_path / "state" / "run" / "daemon.sock")


@pytest.mark.parametrize(
    ("argv", "forwarded"),
    [
        (["search", "q"], True),
        (["--config", "k.toml", "search", "q", "--json"], True),
        (["--config=k.toml", "context", "p"], True),
        (["search", "q", "--format", "vimgrep", "--filter", "ext=.py"], True),
        (["search", "--help"], False),
        (["index"], False),
        (["--version"], False),
        ([], False),
    ],
)
def test_what_is_forwarded(argv, forwarded):
    assert client.forwardable(argv) is forwarded


def test_no_daemon_variable_keeps_everything_in_process(monkeypatch):
    monkeypatch.setenv(protocol.NO_DAEMON_ENV, "1")
    assert not client.forwardable(["search", "q"])


def test_state_env_leaves_out_the_daemons_own_variables(monkeypatch):
    monkeypatch.setenv("KAIROX_DAEMON_TEST_HOLD", "1")
    monkeypatch.setenv(protocol.NO_DAEMON_ENV, "1")
    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "none")
    env = protocol.state_env()
    assert env["KAIROX_LOAD_PLUGINS"] == "none"
    assert "KAIROX_DAEMON_TEST_HOLD" not in env
    assert protocol.NO_DAEMON_ENV not in env
    assert env["HOME"] == os.environ["HOME"]


def test_check_owned_accepts_a_private_folder_and_socket(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        protocol.check_owned(str(folder), socket_file=False)
        protocol.check_owned(str(path), socket_file=True)
        with pytest.raises(protocol.DaemonUnsafe, match="is not a folder"):
            protocol.check_owned(str(path), socket_file=False)
    folder.chmod(0o750)
    with pytest.raises(protocol.DaemonUnsafe, match="chmod 700"):
        protocol.check_owned(str(folder), socket_file=False)


def test_check_owned_refuses_a_file_that_is_not_a_socket(tmp_path):
    path = tmp_path / "s.sock"
    path.write_text("")
    with pytest.raises(protocol.DaemonUnsafe, match="is not a socket"):
        protocol.check_owned(str(path), socket_file=True)


def test_messages_round_trip_and_a_cut_message_is_none():
    left, right = socket.socketpair()
    with left, right:
        protocol.send(left, {"op": "status", "argv": ["ü"]})
        assert protocol.receive(right) == {"op": "status", "argv": ["ü"]}
        left.sendall(b"\x00\x00\x00\x10{")  # 16 bytes announced, 1 sent
        left.shutdown(socket.SHUT_WR)
        assert protocol.receive(right) is None


def test_peer_uid_is_this_user():
    left, right = socket.socketpair()
    with left, right:
        assert protocol.peer_uid(left) == os.getuid()


def test_a_workspace_folder_is_sent_absolute(monkeypatch, tmp_path):
    # The daemon runs the command in its own folder: a relative --workspace would miss.
    monkeypatch.chdir(tmp_path)
    sent = client.request(["search", "q", "--workspace", "pkg"])["argv"]
    assert sent == ["search", "q", "--workspace", str(tmp_path / "pkg")]
    inline = client.request(["search", "--workspace=/abs", "q"])["argv"]
    assert inline == ["search", "--workspace=/abs", "q"]
