"""The MCP server behind ``kairox mcp``, on the official ``mcp`` SDK (``MCPServer``).

:func:`build_server` registers the tools of :class:`~kairox.mcp.tools.KairoxTools` with
descriptions written for the model that reads them, and one resource per memory scope.
:func:`run_stdio` serves one client over stdin/stdout; :func:`run_http` serves streamable
HTTP on a socket the caller bound, behind :class:`BearerTokenGuard` when a token is set
(``kairox.support.listening.check_bind`` decides when one is required, as for ``kairox serve``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, Final

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

from kairox import __version__
from kairox.mcp.parameters import (
    APPEND_DOC,
    CONTEXT_DOC,
    FORGET_DOC,
    INSTRUCTIONS,
    MEMORIES_DOC,
    PROPOSES,
    READ_ONLY,
    RECALL_DOC,
    RECORD_REPLY_DOC,
    RECORDS,
    REMEMBER_DOC,
    SEARCH_DOC,
    ByFile,
    ContextSession,
    Filter,
    ForgetKey,
    ForgetScope,
    HitCount,
    ListedScope,
    MemoryBody,
    MemoryKey,
    MemoryQuery,
    MessageCount,
    Messages,
    ModelName,
    Profile,
    Prompt,
    RecallQuery,
    RememberScope,
    RepliedPrompt,
    Reply,
    SearchQuery,
    Session,
)
from kairox.mcp.tools import (
    KairoxTools,
)
from kairox.support.errors import KairoxError
from kairox.support.listening import same_secret

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from kairox.runtime.facade import AppFacade

__all__ = ["TOKEN_ENV", "BearerTokenGuard", "build_server", "run_http", "run_stdio"]

TOKEN_ENV: Final = "KAIROX_MCP_TOKEN"
HTTP_PATH: Final = "/mcp"


def _tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Kairox's own errors (and configuration errors) become MCP tool errors with their message."""
    import inspect

    from kairox.config.errors import ConfigError

    known = (KairoxError, ConfigError)

    if inspect.iscoroutinefunction(fn):

        @wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except known as exc:
                raise ToolError(str(exc)) from None

        return run_async

    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except known as exc:
            raise ToolError(str(exc)) from None

    return run


class KairoxMCPServer(MCPServer):
    """The SDK's server, with argument errors a model can act on: one line per bad
    argument (its name and what is allowed), without pydantic's documentation links and
    echoed input."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            # Still caused by the ValidationError: the SDK logs the bad fields' names.
            raise ToolError(argument_errors(name, exc.__cause__)) from exc.__cause__


def argument_errors(tool: str, error: ValidationError) -> str:
    """``error`` as one line per bad argument: ``Error executing tool search: argument k:
    Input should be less than or equal to 50``. A union's alternatives join with "or"."""
    reasons: dict[str, list[str]] = {}
    for problem in error.errors(include_url=False, include_input=False):
        location = problem["loc"]
        argument = str(location[0]) if location else "arguments"
        said = reasons.setdefault(argument, [])
        message = problem["msg"]
        if said and message.startswith(_SHOULD):
            message = message.removeprefix(_SHOULD)
        if message not in said:
            said.append(message)
    return "\n".join(
        f"Error executing tool {tool}: argument {argument}: {' or '.join(said)}"
        for argument, said in reasons.items()
    )


_SHOULD: Final = "Input should be "


def build_server(facade: AppFacade, *, session_id: str | None = None) -> MCPServer:
    """An MCP server with Kairox's tools and memory resources over ``facade``'s workspace."""
    tools = KairoxTools(facade, session_id=session_id)
    server = KairoxMCPServer(
        "kairox",
        title="Kairox",
        description="Workspace retrieval, context assembly and approved memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    @server.tool(title="Search the workspace", description=SEARCH_DOC, annotations=READ_ONLY)
    @_tool_errors
    def search(
        query: SearchQuery,
        k: HitCount = 8,
        profile: Profile = None,
        filter: Filter = None,
        by_file: ByFile = False,
    ) -> dict[str, Any]:
        return tools.search(query, k, profile, filter, by_file)

    @server.tool(title="Assemble context", description=CONTEXT_DOC, annotations=READ_ONLY)
    @_tool_errors
    async def context(
        prompt: Prompt, profile: Profile = None, session: ContextSession = None
    ) -> dict[str, Any]:
        return await tools.context(prompt, profile, session)

    @server.tool(title="Recall earlier messages", description=RECALL_DOC, annotations=READ_ONLY)
    @_tool_errors
    def recall(query: RecallQuery, k: MessageCount = 10, session: Session = None) -> dict[str, Any]:
        return tools.recall(query, k, session)

    @server.tool(title="Append to a session", description=APPEND_DOC, annotations=RECORDS)
    @_tool_errors
    async def append_messages(
        messages: Messages, session: Session = None, profile: Profile = None
    ) -> dict[str, Any]:
        return await tools.append_messages(
            [m.model_dump(exclude_none=True) for m in messages], session, profile
        )

    @server.tool(title="Record your reply", description=RECORD_REPLY_DOC, annotations=RECORDS)
    @_tool_errors
    async def record_reply(
        reply: Reply,
        prompt: RepliedPrompt = None,
        session: Session = None,
        profile: Profile = None,
        model: ModelName = None,
    ) -> dict[str, Any]:
        return await tools.record_reply(reply, prompt, session, profile, model)

    @server.tool(title="Propose a memory", description=REMEMBER_DOC, annotations=PROPOSES)
    @_tool_errors
    def remember(scope: RememberScope, body: MemoryBody, key: MemoryKey = None) -> dict[str, Any]:
        return tools.remember(scope, body, key)

    @server.tool(title="List approved memories", description=MEMORIES_DOC, annotations=READ_ONLY)
    @_tool_errors
    def memories(scope: ListedScope = None, query: MemoryQuery = None) -> dict[str, Any]:
        return tools.memories(scope, query)

    @server.tool(title="Ask to forget a memory", description=FORGET_DOC, annotations=PROPOSES)
    @_tool_errors
    def forget(key: ForgetKey, scope: ForgetScope = None) -> dict[str, Any]:
        return tools.forget(key, scope)

    for scope, description in (
        ("user", "The user's approved memories (they apply in every workspace)."),
        ("workspace", "This workspace's approved memories."),
        ("session", "Session memories this MCP server kept in this conversation."),
    ):
        server.resource(
            f"kairox://memories/{scope}",
            name=f"{scope}-memories",
            title=f"{scope.capitalize()} memories",
            description=description,
            mime_type="application/json",
        )(_resource_reader(tools, scope))
    return server


def _resource_reader(tools: KairoxTools, scope: str) -> Callable[[], str]:
    def read() -> str:
        return tools.memories_resource(scope)

    return read


# -- transports ---------------------------------------------------------------------------


def run_stdio(server: MCPServer) -> None:
    """Serve one client over stdin and stdout until it disconnects."""
    server.run("stdio")


class BearerTokenGuard:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``.

    Compared in constant time; a refused request reaches nothing behind it.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = None
            for name, value in scope.get("headers", []):
                if name == b"authorization":
                    kind, _, credentials = value.decode("latin-1").partition(" ")
                    if kind.lower() == "bearer":
                        given = credentials.strip()
            if not same_secret(given, self.token):
                from starlette.responses import JSONResponse

                refusal = JSONResponse(
                    {
                        "error": "this MCP server needs its token: send 'Authorization: Bearer <token>'"
                    },
                    status_code=401,
                    headers={"www-authenticate": 'Bearer realm="kairox-mcp"'},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, *, host: str, token: str | None) -> ASGIApp:
    """The streamable HTTP application at :data:`HTTP_PATH`, token-guarded when set."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return BearerTokenGuard(app, token) if token is not None else app


def run_http(
    server: MCPServer,
    sock: socket.socket,
    *,
    host: str,
    token: str | None,
) -> None:
    """Serve streamable HTTP on the listening ``sock`` until interrupted."""
    import uvicorn

    config = uvicorn.Config(
        http_app(server, host=host, token=token),
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run(sockets=[sock])
