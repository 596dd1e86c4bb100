"""``kairox search --history``: the recall archive (every session's messages), searched."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from kairox.cli.app import console, print_json
from kairox.store.messages import NoSuchSession, read_messages
from kairox.support.terminal import printable

__all__ = ["search_history"]


def search_history(facade: Any, query: str, k: int, session: str | None, as_json: bool) -> None:
    """Print the ``k`` messages most relevant to ``query``: of ``session`` when given,
    else of every session of the workspace."""
    from kairox.recall import recalled_json

    if session and not read_messages(facade.events, session, limit=1):
        raise NoSuchSession(session)
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
        print_hit(hit)


def _line(message: dict[str, Any]) -> str:
    taint = " (tool output)" if message["tool_output"] else ""
    return (
        f"{message['time']} · {message['session']} · "
        f"{message['speaker']}{taint}: {' '.join(message['text'].split())}"
    )


def print_hit(hit: dict[str, Any]) -> None:
    """One hit as its own block: the message found on its numbered line, then the messages
    said before and after it, indented and marked as context, then a blank line."""
    messages = hit["messages"]
    found = next((i for i, message in enumerate(messages) if message["hit"]), 0)
    # Message text is untrusted: no control characters, no rich markup.
    console.print(Text(printable(f"{hit['rank']:>3}. {_line(messages[found])}")))
    for i, message in enumerate(messages):
        if i != found:
            when = "before" if i < found else "after"
            line = f"       context, {when}: {_line(message)}"
            console.print(Text(printable(line)), style="dim")
    console.print("")
