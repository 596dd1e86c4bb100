"""``kairox search --history``: the recall archive (every session's messages), searched."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from kairox.cli.app import console, print_json
from kairox.terminal import printable

__all__ = ["search_history"]


def search_history(facade: Any, query: str, k: int, session: str | None, as_json: bool) -> None:
    """Print the ``k`` messages most relevant to ``query``: of ``session`` when given,
    else of every session of the workspace."""
    from kairox.recall import recalled_json

    scope = "own" if session else "workspace"
    found = facade.recall(query, session_id=session or "", scope=scope, k=k)
    hits = recalled_json(found)
    if as_json:
        print_json({"query": query, "session": session, "scope": scope, "hits": hits})
        return
    if not hits:
        console.print("no messages found", markup=False)
        return
    for hit in hits:
        for message in hit["messages"]:
            mark = f"{hit['rank']:>3}." if message["hit"] else "    "
            taint = " (tool output)" if message["tool_output"] else ""
            line = (
                f"{mark} {message['time']} · {message['session']} · "
                f"{message['speaker']}{taint}: {' '.join(message['text'].split())}"
            )
            # Message text is untrusted: no control characters, no rich markup.
            console.print(Text(printable(line)), style="" if message["hit"] else "dim")
