"""Who may talk to the memory browser, and from where.

The memory browser can approve memories that steer every future session, so a request that
changes state must be one a person made on the page itself:

* **One canonical origin.** The server knows the single origin its page is served from
  (``http://127.0.0.1:8765`` by default). A request whose ``Host`` names anything else is
  refused (a ``GET`` of a page is redirected there instead): that blocks DNS rebinding, where
  a hostile site points its own name at 127.0.0.1 and reads the API as "same origin".
* **Cross-site request forgery.** ``POST``, ``PUT`` and ``DELETE`` need an ``Origin`` header
  equal to the canonical origin *and* an ``X-CSRF-Token`` header equal to a random token made
  at server start and embedded in the page. A form on another site can send neither.
* **Optional token.** Binding to a non-loopback address requires a token (see
  :func:`check_bind`). With a token, every request needs it: ``Authorization: Bearer <token>``,
  or the ``kairox_token`` cookie set by visiting ``/?token=<token>`` once. The cookie holds an
  HMAC of the token, never the token itself, and is ``HttpOnly`` and ``SameSite=Strict``.
  Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import secrets
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kairox.support.listening import (
    MIN_TOKEN_LENGTH,
    ServeError,
    is_loopback,
    is_wildcard,
    same_secret,
)
from kairox.support.listening import check_bind as _check_bind

__all__ = [
    "COOKIE_NAME",
    "CSRF_HEADER",
    "MIN_TOKEN_LENGTH",
    "TOKEN_ENV",
    "Origin",
    "SecurityGuard",
    "ServeError",
    "check_bind",
    "is_loopback",
    "new_csrf_token",
]

COOKIE_NAME: Final = "kairox_token"
CSRF_HEADER: Final = "X-CSRF-Token"
TOKEN_ENV: Final = "KAIROX_SERVE_TOKEN"
SAFE_METHODS: Final = frozenset({"GET", "HEAD"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_COOKIE_CONTEXT: Final = b"kairox-serve-cookie-v1"

SECURITY_HEADERS: Final = {
    # Scripts and styles come only from this server's own files: no inline code, no CDN.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    # The page embeds the CSRF token and the API returns live data: never cache either.
    "cache-control": "no-store",
}


def new_csrf_token() -> str:
    """A fresh random CSRF token (one per server start)."""
    return secrets.token_urlsafe(32)


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a network address without a token, or with a guessable one."""
    _check_bind(host, token, token_env=TOKEN_ENV)


@dataclass(frozen=True)
class Origin:
    """A web origin: scheme, lower-cased host and explicit port."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Origin:
        """Parse ``scheme://host[:port]``; raises :class:`ValueError` on anything else."""
        try:
            parts = urlsplit(text.strip())
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"not an origin: {text!r} ({exc})") from None
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"not an origin: {text!r}; expected http://HOST:PORT")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise ValueError(f"an origin has no path, query or user: {text!r}")
        return cls(parts.scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[parts.scheme])

    @classmethod
    def for_bind(cls, host: str, port: int) -> Origin:
        """The origin a browser uses for a server bound to ``host``:``port`` over HTTP."""
        if is_wildcard(host):
            raise ServeError(
                f"{host or 'an empty host'!r} listens on every interface, so the server cannot "
                "tell which address your browser will use. Pass --origin with that address, "
                f"e.g. --origin http://192.168.1.20:{port}; requests from other origins are "
                "refused."
            )
        return cls("http", host.strip().strip("[]").lower(), port)

    def matches_host_header(self, host_header: str | None) -> bool:
        """Whether a request's ``Host`` header names this origin."""
        if not host_header:
            return False
        try:
            return Origin.parse(f"{self.scheme}://{host_header}") == self
        except ValueError:
            return False

    def matches(self, origin_header: str | None) -> bool:
        """Whether a request's ``Origin`` header is exactly this origin (``null`` never is)."""
        if not origin_header or origin_header.strip() == "null":
            return False
        try:
            return Origin.parse(origin_header) == self
        except ValueError:
            return False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        if self.port == _DEFAULT_PORTS[self.scheme]:
            return f"{self.scheme}://{host}"
        return f"{self.scheme}://{host}:{self.port}"


_same = same_secret


def cookie_value(token: str) -> str:
    """What the login cookie holds: an HMAC of the token, so the browser never stores it."""
    return hmac.new(token.encode("utf-8"), _COOKIE_CONTEXT, hashlib.sha256).hexdigest()


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _refusal(request: Request, status: int, message: str) -> Response:
    """An error in the shape the caller reads: JSON for the API, a short page otherwise."""
    if _is_api(request) or request.method not in SAFE_METHODS:
        return JSONResponse({"error": message}, status_code=status)
    body = (
        "<!doctype html><meta charset=utf-8><title>Kairox memory</title>"
        f"<p>{html.escape(message)}</p>"
    )
    return HTMLResponse(body, status_code=status)


class SecurityGuard:
    """ASGI middleware that applies the rules in this module's docstring to every request.

    Refusals happen before the application runs, so a refused request changes nothing.
    """

    def __init__(self, app: ASGIApp, *, origin: Origin, csrf_token: str, token: str | None) -> None:
        self.app = app
        self.origin = origin
        self.csrf_token = csrf_token
        self.token = token
        self._cookie = cookie_value(token) if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._check(request)
        if refusal is not None:
            await self._send_with_headers(refusal, scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _send_with_headers(
        self, response: Response, scope: Scope, receive: Receive, send: Send
    ) -> None:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        await response(scope, receive, send)

    def _check(self, request: Request) -> Response | None:
        if not self.origin.matches_host_header(request.headers.get("host")):
            return self._wrong_host(request)
        if self.token is not None:
            refusal = self._check_token(request)
            if refusal is not None:
                return refusal
        if request.method not in SAFE_METHODS:
            return self._check_csrf(request)
        return None

    def _wrong_host(self, request: Request) -> Response:
        target = f"{self.origin}{request.url.path}"
        if request.url.query:
            target += f"?{request.url.query}"
        if request.method in SAFE_METHODS and not _is_api(request):
            # A person who typed "localhost" instead of "127.0.0.1": send them to the page.
            return RedirectResponse(target, status_code=307)
        return _refusal(
            request,
            421,
            f"this server answers only at {self.origin}; open {self.origin}/ instead",
        )

    def _check_token(self, request: Request) -> Response | None:
        assert self.token is not None and self._cookie is not None
        if request.method in SAFE_METHODS and request.url.path == "/":
            offered = request.query_params.get("token")
            if offered is not None:
                if not _same(offered, self.token):
                    return _refusal(request, 401, "wrong token; check the --token you started with")
                # Log in once: keep an HMAC of the token in a cookie and drop the token from
                # the address bar, so it does not linger in history or get copied along.
                response = RedirectResponse("/", status_code=303)
                response.set_cookie(
                    COOKIE_NAME,
                    self._cookie,
                    httponly=True,
                    samesite="strict",
                    secure=self.origin.scheme == "https",
                    path="/",
                )
                return response
        authorization = request.headers.get("authorization", "")
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer" and _same(credentials.strip(), self.token):
            return None
        if _same(request.cookies.get(COOKIE_NAME), self._cookie):
            return None
        refusal = _refusal(
            request,
            401,
            "this server needs its token: open /?token=<token> once in this browser, "
            "or send 'Authorization: Bearer <token>'",
        )
        refusal.headers["www-authenticate"] = 'Bearer realm="kairox"'
        return refusal

    def _check_csrf(self, request: Request) -> Response | None:
        if not self.origin.matches(request.headers.get("origin")):
            given = request.headers.get("origin") or "no Origin header"
            return _refusal(
                request,
                403,
                f"refused a cross-origin request ({json.dumps(given)}): changes must come "
                f"from the memory browser page at {self.origin}/",
            )
        if not _same(request.headers.get(CSRF_HEADER), self.csrf_token):
            return _refusal(
                request,
                403,
                f"refused a request without this page's {CSRF_HEADER} header; "
                "reload the page (the server may have restarted)",
            )
        return None
