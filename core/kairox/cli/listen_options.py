"""The ``--host``/``--port``/``--token`` options every listening command shares.

``kairox serve`` and ``kairox mcp --http`` follow one rule (:mod:`kairox.support.listening`): a
loopback address by default, anything else only with a token. Their options say so in one
place, with each command's default port, token variable and wording.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def listen_options(
    *, port: int, token_env: str, token_help: str, when: str = ""
) -> Callable[[F], F]:
    """Add ``--host``, ``--port`` and ``--token`` to a command.

    :param port: the default port.
    :param token_env: the environment variable ``--token`` also reads.
    :param token_help: what the token does for this command's clients.
    :param when: a prefix for each help text (``"With --http: "``) when the options apply
        only in one mode of the command.
    """

    def decorate(command: F) -> F:
        options = (
            click.option(
                "--host",
                default="127.0.0.1",
                show_default=True,
                help=f"{when}{'a' if when else 'A'}ddress to listen on. Anything but a loopback "
                "address needs --token.",
            ),
            click.option(
                "--port",
                default=port,
                show_default=True,
                type=click.IntRange(0, 65535),
                help=f"{when}{'p' if when else 'P'}ort to listen on; 0 picks a free one.",
            ),
            click.option(
                "--token",
                envvar=token_env,
                show_envvar=True,
                default=None,
                help=f"{when}{token_help}",
            ),
        )
        for option in reversed(options):
            command = option(command)
        return command

    return decorate
