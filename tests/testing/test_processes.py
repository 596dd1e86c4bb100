"""``kairox.testing.processes``: scripts run as a user's shell runs them."""

from __future__ import annotations

from kairox.testing.processes import shell_process


def test_a_shell_script_gets_its_arguments_and_runs_in_cwd(tmp_path):
    ran = shell_process('echo "$0 $1"; pwd', "first", "second", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["first second", str(tmp_path)]


def test_a_failing_command_stops_the_script(tmp_path):
    ran = shell_process("false | cat; echo reached", cwd=tmp_path)
    assert ran.returncode != 0
    assert "reached" not in ran.stdout
