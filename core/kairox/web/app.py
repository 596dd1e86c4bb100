"""The memory browser's ASGI application: one HTML page and a small JSON API.

Every request asks the facade for a fresh read of the memory store. Nothing is cached here:
a CLI, a TUI and this server may share one SQLite database (WAL mode), and an edit made in
any of them must show on this page's next request.

API (all JSON; errors are ``{"error": message}``):

``GET /api/memories?scope=user|workspace|session&status=approved|pending&q=text``
    ``{"memories": [...], "count": n}``. Without ``scope``: user and workspace memories.
    ``q`` keeps records whose key or body contains it, ignoring case. Each approved memory
    says how many ``earlier_values`` its key has had.
``GET /api/memories/{id}/history``
    ``{"history": [...], "count": n}``: the values the memory's key has had, superseded ones
    oldest first (each with ``valid_from`` and ``valid_to``), the current one last.
``POST /api/memories`` ``{"scope": "user"|"workspace", "key", "body"}``
    Write (or overwrite) a memory; the person is the approver.
``POST /api/memories/{id}/approve`` and ``POST /api/memories/{id}/reject`` ``{"reason"?}``
    Decide a pending proposal; 409 when it is not pending.
``PUT /api/memories/{id}`` ``{"body"}``
    Replace an approved memory's body (under its key).
``DELETE /api/memories/{id}``
    Forget an approved memory.

Mutations answer ``{"memory": record}``. 400 means bad input, 404 an id this workspace does
not see, 409 a record in the wrong state. :mod:`kairox.web.security` guards every request.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from kairox.memory.approvals import MemoryInputError, MemoryNotFound
from kairox.memory.marker_rules import SCOPES_WIDEST_FIRST
from kairox.support.errors import KairoxError
from kairox.support.secrets import scrub
from kairox.web.security import CSRF_HEADER, Origin, SecurityGuard, new_csrf_token

if TYPE_CHECKING:
    from kairox.memory.records import MemorySlot
    from kairox.memory.store import MemoryRecord
    from kairox.runtime.facade import AppFacade

__all__ = ["MAX_BODY_BYTES", "create_app"]

FacadeFactory = Callable[[], "AppFacade"]
T = TypeVar("T")

LIST_SCOPES: Final = SCOPES_WIDEST_FIRST
# Who made a change, as the memory events record it.
ACTOR: Final = "web"
LIST_STATUSES: Final = ("approved", "pending")
# Memories are short facts; a megabyte-sized request is a mistake or an attack.
MAX_BODY_BYTES: Final = 64 * 1024
_STATIC: Final = resources.files("kairox.web") / "static"
_ASSETS: Final = {"app.js": "text/javascript", "style.css": "text/css"}


class ApiError(Exception):
    """A request the API answers with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def create_app(
    facade_factory: FacadeFactory, *, token: str | None, allowed_origin: str
) -> Starlette:
    """The memory browser for the workspace of ``facade_factory()``.

    :param facade_factory: called on every request; returning one shared facade is fine
        (its store reads the database on every call), a fresh one per call works too.
    :param token: when set, every request must carry it (see :mod:`kairox.web.security`).
    :param allowed_origin: the one origin the page is served from, e.g.
        ``http://127.0.0.1:8765``; requests naming another host, and state changes coming
        from another origin, are refused.
    """
    origin = Origin.parse(allowed_origin)
    csrf_token = new_csrf_token()
    # The page template and assets are part of the code, not data: read them once.
    page_template = (_STATIC / "index.html").read_text(encoding="utf-8")
    assets = {name: (_STATIC / name).read_bytes() for name in _ASSETS}

    async def call(work: Callable[[AppFacade], T]) -> T:
        # The facade's SQLite calls block; keep them off the event loop.
        return await run_in_threadpool(lambda: work(facade_factory()))

    async def page(request: Request) -> Response:
        workspace = await call(lambda facade: str(facade.workspace_root))
        body = (
            page_template.replace("{{csrf_token}}", html.escape(csrf_token))
            .replace("{{csrf_header}}", html.escape(CSRF_HEADER))
            .replace("{{workspace}}", html.escape(workspace))
        )
        return HTMLResponse(body)

    def asset(name: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            return Response(assets[name], media_type=_ASSETS[name])

        return serve

    async def list_memories(request: Request) -> Response:
        params = request.query_params
        scope = params.get("scope") or None
        status = params.get("status") or "approved"
        query = params.get("q", "").strip()
        if scope is not None and scope not in LIST_SCOPES:
            raise ApiError(400, f"unknown scope {scope!r}; use one of {', '.join(LIST_SCOPES)}")
        if status not in LIST_STATUSES:
            raise ApiError(400, f"unknown status {status!r}; use one of {', '.join(LIST_STATUSES)}")
        records, earlier = await call(
            lambda facade: (
                facade.memories(scope=scope, pending=status == "pending"),
                _earlier_values(facade),
            )
        )
        if query:
            records = [r for r in records if _contains(r, query)]
        shown = [
            {
                **r.as_json(),
                **({"earlier_values": earlier[r.slot]} if r.status == "approved" else {}),
            }
            for r in records
        ]
        return JSONResponse({"memories": shown, "count": len(records)})

    async def history(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        records = await call(lambda facade: _history(facade, memory_id))
        return JSONResponse({"history": [r.as_json() for r in records], "count": len(records)})

    async def create_memory(request: Request) -> Response:
        data = await _json_object(request, required=True)
        scope, key, body = (_string(data, name) for name in ("scope", "key", "body"))
        record = await call(
            lambda facade: facade.memory.set(
                scope, key, body, workspace_id=facade.workspace_id, actor=ACTOR
            )
        )
        return _one(record)

    async def approve(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        return _one(await call(lambda facade: _decide(facade, memory_id, approve=True)))

    async def reject(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        data = await _json_object(request, required=False)
        reason = _string(data, "reason", required=False).strip() or "rejected by the user"
        return _one(
            await call(lambda facade: _decide(facade, memory_id, approve=False, reason=reason))
        )

    async def edit(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        body = _string(await _json_object(request, required=True), "body")
        return _one(await call(lambda facade: _edit(facade, memory_id, body)))

    async def forget(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        return _one(await call(lambda facade: _forget(facade, memory_id)))

    routes = [
        Route("/", page, methods=["GET"]),
        *(Route(f"/static/{name}", asset(name), methods=["GET"]) for name in _ASSETS),
        Route("/api/memories", list_memories, methods=["GET"]),
        Route("/api/memories", create_memory, methods=["POST"]),
        Route("/api/memories/{memory_id:int}/approve", approve, methods=["POST"]),
        Route("/api/memories/{memory_id:int}/reject", reject, methods=["POST"]),
        Route("/api/memories/{memory_id:int}/history", history, methods=["GET"]),
        Route("/api/memories/{memory_id:int}", edit, methods=["PUT"]),
        Route("/api/memories/{memory_id:int}", forget, methods=["DELETE"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SecurityGuard, origin=origin, csrf_token=csrf_token, token=token)],
        exception_handlers={
            ApiError: _api_error,
            MemoryInputError: _input_error,
            MemoryNotFound: _not_found,
            HTTPException: _http_error,
            KairoxError: _kairox_error,
        },
    )


# -- the work, run in a worker thread ------------------------------------------------------


def _visible_record(facade: AppFacade, memory_id: int) -> MemoryRecord:
    """The record if this workspace sees it (user, or this workspace's); else 404.

    Another workspace's memories are not this page's to change, even by a guessed id.
    """
    record = facade.memory.get(memory_id)
    if record is None or (record.scope != "user" and record.workspace_id != facade.workspace_id):
        raise ApiError(404, f"no memory #{memory_id} in this workspace; reload the page")
    return record


def _decide(facade: AppFacade, memory_id: int, *, approve: bool, reason: str = "") -> MemoryRecord:
    record = _visible_record(facade, memory_id)
    if record.status != "pending":
        raise ApiError(409, f"memory #{memory_id} is {record.status}, not a pending proposal")
    try:
        if approve:
            return facade.memory.approve(memory_id, actor=ACTOR)
        return facade.memory.reject(memory_id, reason, actor=ACTOR)
    except MemoryNotFound as exc:
        # Decided (or deleted) by another process between our read and our write.
        status = 404 if facade.memory.get(memory_id) is None else 409
        raise ApiError(status, str(exc)) from exc


def _edit(facade: AppFacade, memory_id: int, body: str) -> MemoryRecord:
    record = _visible_record(facade, memory_id)
    if record.status != "approved":
        raise ApiError(
            409,
            f"memory #{memory_id} is {record.status}; only approved memories can be edited "
            "(approve or reject a proposal as it stands)",
        )
    if not body.strip():
        raise ApiError(400, "the new body is empty; use Forget to delete a memory")
    try:  # the same path as `kairox memory edit`, by id: session memories may have no key
        return facade.memory.edit_by_id(memory_id, body, actor=ACTOR)
    except MemoryNotFound as exc:
        raise ApiError(404, f"memory #{memory_id} no longer exists; reload the page") from exc


def _forget(facade: AppFacade, memory_id: int) -> MemoryRecord:
    record = _visible_record(facade, memory_id)
    if record.status == "pending":
        raise ApiError(409, f"memory #{memory_id} is a pending proposal; reject it instead")
    try:  # the same path as `kairox memory forget`
        return facade.memory.forget_by_id(memory_id, actor=ACTOR)
    except MemoryNotFound as exc:
        raise ApiError(404, f"memory #{memory_id} no longer exists; reload the page") from exc


def _history(facade: AppFacade, memory_id: int) -> list[MemoryRecord]:
    """The values of the key memory ``memory_id`` holds (or held, for an earlier value)."""
    record = _visible_record(facade, memory_id)
    if record.status not in ("approved", "superseded"):
        raise ApiError(409, f"memory #{memory_id} is {record.status}; only memories have a history")
    if record.key is None:
        return [record]
    return facade.memory.store.history(
        record.scope, record.key, workspace_id=record.workspace_id, session_id=record.session_id
    )


def _earlier_values(facade: AppFacade) -> Counter[MemorySlot]:
    """How many superseded values each key has, by the slot its current memory occupies."""
    return Counter(r.slot for r in facade.memory.store.list(status="superseded"))


def _contains(record: MemoryRecord, query: str) -> bool:
    needle = query.casefold()
    return needle in (record.key or "").casefold() or needle in record.body.casefold()


# -- request and response plumbing ---------------------------------------------------------


async def _json_object(request: Request, *, required: bool) -> dict[str, Any]:
    """The request body as a JSON object (``{}`` when optional and empty)."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise ApiError(413, f"the request body is over {MAX_BODY_BYTES // 1024} KiB")
    if not raw.strip():
        if required:
            raise ApiError(400, "the request needs a JSON object body")
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(
            400, "the request body nests its JSON too deeply; send a flat JSON object"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _string(data: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError(400, f"missing field {name!r}")
        return ""
    if not isinstance(value, str):
        raise ApiError(400, f"field {name!r} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"field {name!r} holds a lone surrogate (a bad \\u escape)") from None
    return value


def _one(record: MemoryRecord) -> Response:
    return JSONResponse({"memory": record.as_json()})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse({"error": exc.message}, status_code=exc.status)


async def _input_error(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=400)


async def _not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=404)


async def _kairox_error(request: Request, exc: Exception) -> Response:
    # A broken kairox.toml or database: say what is wrong instead of a bare 500.
    return JSONResponse({"error": scrub(str(exc))}, status_code=500)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # Unknown paths and methods: JSON like the rest of the API, the page gets plain text.
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)
    return Response(exc.detail, status_code=exc.status_code, headers=exc.headers)
