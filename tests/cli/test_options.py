"""The options the ``kairox`` commands share (kairox.cli.options)."""

from __future__ import annotations

import click
from click.testing import CliRunner

from kairox.cli.options import json_option, profile_option


@click.command()
@profile_option()
@json_option("Print the thing as JSON.")
def _command(profile: str | None, as_json: bool) -> None:
    click.echo(f"{profile}|{as_json}")


def test_shared_options_reach_the_command_under_their_parameter_names() -> None:
    runner = CliRunner()
    assert runner.invoke(_command, []).output == "None|False\n"
    assert runner.invoke(_command, ["-p", "fast", "--json"]).output == "fast|True\n"
    assert runner.invoke(_command, ["--profile", "slow"]).output == "slow|False\n"


def test_shared_options_say_what_they_do_in_help() -> None:
    help_text = CliRunner().invoke(_command, ["--help"]).output
    assert "-p, --profile TEXT" in help_text and "Profile name or alias." in help_text
    assert "Print the thing as JSON." in help_text
