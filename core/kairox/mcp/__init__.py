"""``kairox mcp``: Kairox's search, context and memory for any MCP client (Claude Code, Cursor...).

A surface like the CLI and the web page: it calls the :class:`~kairox.runtime.facade.AppFacade` and
nothing else. :mod:`kairox.mcp.tools` holds what each tool does (plain Python, no SDK);
:mod:`kairox.mcp.server` registers them on the official ``mcp`` SDK (with the descriptions and
parameter types of :mod:`kairox.mcp.parameters`) and runs the stdio and
streamable HTTP transports. Importing this package needs ``pip install 'kairox[mcp]'``.
"""

from __future__ import annotations

from kairox.mcp.server import TOKEN_ENV, BearerTokenGuard, build_server, run_http, run_stdio
from kairox.mcp.tools import KairoxTools, ToolInputError, parse_filter

__all__ = [
    "TOKEN_ENV",
    "BearerTokenGuard",
    "KairoxTools",
    "ToolInputError",
    "build_server",
    "parse_filter",
    "run_http",
    "run_stdio",
]
