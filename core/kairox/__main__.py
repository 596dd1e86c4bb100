"""The ``kairox`` console script: a running daemon answers search and context, else the CLI.

Only the standard library is imported before the daemon answers (click, rich, pydantic
and the plugins cost more than the search itself); the full CLI loads on fallback.
"""

from __future__ import annotations

import os
import sys


def main() -> int | None:
    argv = sys.argv[1:]
    from kairox.daemon import client

    if client.forwardable(argv):
        answer = client.forward(argv)
        if answer is not None:
            try:
                sys.stdout.buffer.write(answer.stdout)
                sys.stdout.buffer.flush()
                sys.stderr.buffer.write(answer.stderr)
                sys.stderr.buffer.flush()
            except BrokenPipeError:  # `kairox search ... | head`: the reader has gone
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return 1
            return answer.exit_code
    from kairox.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":  # pragma: no cover - the console script calls main()
    sys.exit(main())
