"""One base for the loopback servers Kairox's tests talk to over real sockets.

Every test server (OpenAI-compatible chat, Bedrock, Pinecone, Weaviate) speaks its real
protocol on ``127.0.0.1`` and shares one vocabulary:

* lifecycle: :meth:`~LoopbackServer.start`, :meth:`~LoopbackServer.stop` (``close`` is the
  same), ``with server:``; :attr:`~LoopbackServer.port` and :attr:`~LoopbackServer.url`
  (``http://127.0.0.1:<port>``), both still readable after ``stop`` so a test can point a
  client at a port where nothing listens;
* records: :attr:`~LoopbackServer.requests` (every request, oldest first, as
  :class:`RecordedRequest`), :meth:`~LoopbackServer.count`,
  :meth:`~LoopbackServer.clear_requests`;
* faults, each for the next ``times`` requests (``None``: until cleared) to ``target``
  (``None``: any), after ``after`` requests served normally:
  :meth:`~LoopbackServer.fail` (an error status or code), :meth:`~LoopbackServer.throttle`
  (the service's "slow down" error), :meth:`~LoopbackServer.delay` (slow replies),
  :meth:`~LoopbackServer.malformed` (a reply the client cannot read),
  :meth:`~LoopbackServer.disconnect` (the connection reset, no reply);
  :meth:`~LoopbackServer.clear_faults`, and :meth:`~LoopbackServer.reset` for both.

A target is a request path (``"/query"``), a ``"METHOD /path"`` prefix (``"GET /v1"``), or
a gRPC method name (``"Search"``). Faults of one kind queue up: the first one pending for
a request is used up before the next applies, as a script would be.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "Fault",
    "FaultPlan",
    "LoopbackHTTPServer",
    "LoopbackServer",
    "RecordedRequest",
    "Reply",
    "closed_url",
]

FAULT_KINDS = ("fail", "delay", "malformed", "disconnect")


@dataclass(slots=True)
class RecordedRequest:
    """One request a loopback server received.

    :param method: the HTTP method, or ``"GRPC"`` for a gRPC call.
    :param path: the path without its query string, or the gRPC method name.
    :param headers: header (or gRPC metadata) names lower-cased; the last value wins.
    :param body: the raw body (``b""`` for none or a gRPC call).
    :param json: the body parsed as JSON, ``None`` when it is not JSON.
    :param query: the query string's parameters.
    :param status: what the server answered (0 until it has).
    :param raw_path: the request target exactly as sent, query string included.
    """

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    json: Any = None
    query: dict[str, list[str]] = field(default_factory=dict)
    status: int = 0
    raw_path: str = ""

    @property
    def target(self) -> str:
        """``"METHOD /path"`` (a gRPC call: its method name)."""
        return self.path if self.method == "GRPC" else f"{self.method} {self.path}"


@dataclass(slots=True)
class Fault:
    """One injected misbehaviour (see the module docs); ``details`` holds what a server
    needs beyond the shared fields (a content type, a malformed reply's mode...)."""

    kind: str
    times: int | None = 1
    target: str | None = None
    after: int = 0
    error: int | str | None = None
    retry_after: float | str | None = None
    message: str | None = None
    seconds: float = 0.0
    body: bytes | None = None
    details: dict[str, Any] = field(default_factory=dict)


def target_matches(target: str | None, request: RecordedRequest) -> bool:
    """Whether a fault's or a count's ``target`` names ``request``."""
    if target is None:
        return True
    if " " in target:
        return request.target.startswith(target)
    return request.path == target


class FaultPlan:
    """The faults pending on one server, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        if fault.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {fault.kind!r}; one of {FAULT_KINDS}")
        if fault.times is not None and fault.times < 1:
            raise ValueError(f"times must be at least 1 (or None), got {fault.times}")
        with self._lock:
            self._faults.append(fault)

    def take(self, kind: str, request: RecordedRequest, *, accepts: Any = None) -> Fault | None:
        """The fault of ``kind`` this request gets, used up by one; ``None`` for none.

        The first pending fault of the kind whose target names the request (and that
        ``accepts(fault)``, when given) decides: while its ``after`` lasts the request is
        served normally, then it applies ``times`` times."""
        with self._lock:
            for fault in self._faults:
                if fault.kind != kind or not target_matches(fault.target, request):
                    continue
                if accepts is not None and not accepts(fault):
                    continue
                if fault.after > 0:
                    fault.after -= 1
                    return None
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()


class LoopbackServer:
    """The shared lifecycle, records and fault vocabulary; a subclass serves the protocol.

    Subclasses implement :meth:`_serve` (bind and start serving; return the port) and
    :meth:`_shutdown`, record each request with :meth:`_record` and consult
    :attr:`faults` where the protocol lets a fault happen.
    """

    #: What :meth:`throttle` sends: the service's own "slow down" error.
    THROTTLE_ERROR: ClassVar[int | str] = 429
    host: ClassVar[str] = "127.0.0.1"

    def __init__(self) -> None:
        self.faults = FaultPlan()
        self._records_lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._running = False
        self._port: int | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        """Bind a free port on 127.0.0.1 and serve in the background (``with`` does this)."""
        if self._running:
            return self
        self._stopping.clear()
        self._port = self._serve()
        self._running = True
        return self

    def stop(self) -> None:
        """Stop serving and free the port; replies still waiting give up at once."""
        if not self._running:
            return
        self._stopping.set()
        self._running = False
        self._shutdown()

    close = stop

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port; kept after :meth:`stop`, so a test can see that nothing listens."""
        if self._port is None:
            raise RuntimeError(
                f"the {type(self).__name__} is not started (never was): use it as a "
                "context manager, or call start()"
            )
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.port}"

    def _serve(self) -> int:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError

    # -- records -----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._records_lock:
            return list(self._requests)

    def count(self, target: str | None = None, *, method: str | None = None) -> int:
        """How many requests (to ``target``, with ``method``) were received, refused ones
        included."""
        with self._records_lock:
            return sum(
                1
                for r in self._requests
                if target_matches(target, r) and (method is None or r.method == method)
            )

    def clear_requests(self) -> None:
        with self._records_lock:
            self._requests.clear()

    def reset(self) -> None:
        """Forget the recorded requests and every pending fault."""
        self.clear_requests()
        self.clear_faults()

    def _record(self, request: RecordedRequest) -> int:
        """Keep ``request``; returns how many have been received, this one included."""
        with self._records_lock:
            self._requests.append(request)
            return len(self._requests)

    # -- faults ------------------------------------------------------------------------

    def fail(
        self,
        error: int | str,
        times: int | None = 1,
        *,
        target: str | None = None,
        after: int = 0,
        retry_after: float | str | None = None,
        message: str | None = None,
        **details: Any,
    ) -> None:
        """Answer with ``error`` (an HTTP status, or the service's error code or gRPC
        status), with a ``Retry-After`` when ``retry_after`` is given."""
        self.faults.add(
            Fault(
                "fail",
                times,
                target,
                after,
                error=self._check_error(error, target),
                retry_after=retry_after,
                message=message,
                details=details,
            )
        )

    def throttle(
        self,
        times: int | None = 1,
        *,
        target: str | None = None,
        after: int = 0,
        retry_after: float | str | None = 0,
    ) -> None:
        """The service's "too many requests" (:attr:`THROTTLE_ERROR`), with ``Retry-After``."""
        self.fail(self.THROTTLE_ERROR, times, target=target, after=after, retry_after=retry_after)

    def delay(self, seconds: float, times: int | None = None, *, target: str | None = None) -> None:
        """Hold each of the next ``times`` replies (``None``: all) for ``seconds``."""
        self.faults.add(Fault("delay", times, target, seconds=seconds))

    def malformed(
        self,
        times: int | None = 1,
        *,
        target: str | None = None,
        after: int = 0,
        body: bytes | str | None = None,
        **details: Any,
    ) -> None:
        """Answer with a reply the client cannot read: ``body`` as sent (by default one
        the server picks), or what ``details`` name for this server."""
        data = body.encode() if isinstance(body, str) else body
        self.faults.add(Fault("malformed", times, target, after, body=data, details=details))

    def disconnect(self, times: int | None = 1, *, target: str | None = None) -> None:
        """Close the connection without a reply (a connection reset)."""
        self.faults.add(Fault("disconnect", times, target))

    def clear_faults(self) -> None:
        self.faults.clear()

    def _check_error(self, error: int | str, target: str | None) -> int | str:
        """A subclass rejects an error its protocol cannot send (here: anything goes)."""
        return error

    def _pause(self, seconds: float) -> bool:
        """Sleep unless the server is stopping; ``True`` means it is."""
        if seconds <= 0:
            return self._stopping.is_set()
        return self._stopping.wait(seconds)


# -- HTTP ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Reply:
    """What an HTTP loopback server answers; ``drop`` closes the connection instead."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    drop: bool = False

    @classmethod
    def json(cls, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Reply:
        return cls(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck in a slow reply never blocks shutdown
    block_on_close = False
    owner: LoopbackHTTPServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-reply (timeouts, cancelled streams) are expected here;
        # anything else is a bug in the server and should be seen.
        if not isinstance(sys.exc_info()[1], ConnectionError | OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each small write leaves at once, as split
    timeout = 30  # an idle keep-alive connection is closed after this many seconds
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read .requests instead

    def _serve(self) -> None:
        owner = self.server.owner
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command,
            path=url.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=raw,
            json=parsed,
            query=parse_qs(url.query, keep_blank_values=True),
            raw_path=self.path,
        )
        reply = owner._handle(request, self)
        if reply is None:  # the server wrote the reply itself (a stream)
            return
        request.status = reply.status
        if reply.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self.send_response(reply.status)
            names = {name.lower() for name in reply.headers}
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if "content-type" not in names:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve


class LoopbackHTTPServer(LoopbackServer):
    """A loopback server over HTTP/1.1: subclasses implement :meth:`_handle`.

    The body is read and parsed, the request handed to :meth:`_handle` (which records it
    with :meth:`_record` when it should count), and the :class:`Reply` written. A handler
    that streams writes to ``handler.wfile`` itself and returns ``None``.
    """

    #: Handler class, for a server that needs more than :meth:`_handle`.
    handler_class: ClassVar[type[BaseHTTPRequestHandler]] = _Handler

    def __init__(self) -> None:
        super().__init__()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _serve(self) -> int:
        httpd = _HTTPServer((self.host, 0), self.handler_class)
        httpd.owner = self
        self._httpd = httpd
        port = int(httpd.server_address[1])
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}-{port}",
            daemon=True,
        )
        self._thread.start()
        return port

    def _shutdown(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        httpd.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._thread = None

    def _handle(self, request: RecordedRequest, handler: BaseHTTPRequestHandler) -> Reply | None:
        raise NotImplementedError


def closed_url() -> str:
    """An ``http://127.0.0.1:PORT`` nothing listens on (a port just released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
