"""kairox.cli.app: the output helpers every command shares."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from kairox.cli import build_cli
from kairox.cli.app import print_json, skipped_summary
from kairox.cli.daemon_server import Daemon


def test_print_json_is_strict_ascii_json():
    data = {"score": float("nan"), "inf": [float("inf")], "text": "\x1b[8m\u202e\x85 ü"}
    with CliRunner().isolation() as (out, _err, _):
        print_json(data)
        printed = out.getvalue().decode("utf-8")
    assert printed.isascii() and "\x1b" not in printed and "NaN" not in printed
    parsed = json.loads(printed, parse_constant=lambda name: _refuse_constant(name))
    assert parsed == {"score": None, "inf": [None], "text": "\x1b[8m\u202e\x85 ü"}


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"{name} is not strict JSON")


def test_skipped_summary_counts_each_reason():
    assert skipped_summary({}) == ""
    assert skipped_summary({"too large": 1, "binary": 2}) == ", 3 skipped (2 binary, 1 too large)"


def test_the_root_group_carries_the_builder_the_daemon_builds_its_cli_with():
    root = build_cli()
    assert root.build is build_cli
    daemon = Daemon(pm=None, build_cli=root.build)
    built = daemon.cli()
    assert {"search", "context", "daemon"} <= set(built.list_commands(click.Context(built)))
