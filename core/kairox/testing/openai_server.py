"""A loopback OpenAI-compatible server for testing model backends without the internet.

:class:`OpenAITestServer` is a real HTTP server (stdlib ``ThreadingHTTPServer`` on
``127.0.0.1``, an ephemeral port, a background thread) that streams chat completions
byte for byte the way OpenAI does: ``text/event-stream``, chunked transfer encoding, one
``data: {...}`` event per chunk, a role-only first delta, content deltas, a final chunk
with ``finish_reason``, then ``data: [DONE]``. It records every request, and each
failure mode a client must survive can be switched on per test::

    from kairox.testing.openai_server import OpenAITestServer

    with OpenAITestServer(["Hello!"], api_key="sk-test") as server:
        model = OpenAICompatibleModel(server.base_url, api_key_env="MY_KEY")
        server.fail(503, times=2, retry_after=0)        # then the reply
        server.cut_off_after = 3                         # close mid-reply, no [DONE]
        ...
        assert server.chat_requests[0].json["stream"] is True

Behaviour attributes (``first_byte_delay_s``, ``chunk_delay_s``, ``keepalive``, ``crlf``,
``split_bytes``, ``multiline_data``, ``cut_off_after``, ``cut_off_mode``, ``error_after``,
``finish_without_done``, ``include_usage``, ``ignore_stream``) are read at each request, so a test may change them between
requests. The server needs nothing but the standard library.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from kairox.testing.loopback import LoopbackHTTPServer, RecordedRequest

__all__ = ["OpenAITestServer", "RecordedRequest"]

# Odd write sizes that cut multi-byte UTF-8 sequences (2-4 bytes) at every offset.
_SPLIT_PATTERN = (1, 2, 3, 5, 7, 11, 4, 1)

_STATUS_ERRORS: dict[int, tuple[str, str, str | None]] = {
    # status: (message, type, code) as OpenAI words them
    400: ("Bad request.", "invalid_request_error", None),
    429: (
        "Rate limit reached for requests. Please try again later.",
        "requests",
        "rate_limit_exceeded",
    ),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    502: ("Bad gateway.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


def openai_error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """An error body shaped like OpenAI's: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@dataclass
class _Plan:
    """What one streamed reply looks like on the wire (a snapshot of the server's switches)."""

    reply: str
    model: str
    chunk_size: int
    chunk_delay_s: float
    keepalive: bool
    crlf: bool
    split_bytes: bool
    multiline_data: bool
    cut_off_after: int | None
    cut_off_mode: str
    error_after: int | None
    error_message: str
    finish_without_done: bool
    include_usage: bool

    @classmethod
    def snapshot(
        cls, server: OpenAITestServer, reply: str, model: str, include_usage: bool
    ) -> _Plan:
        """One request's plan: its reply, model and usage choice, and every other field
        read from the server's attribute of that name as it is now."""
        given = {"reply": reply, "model": model, "include_usage": include_usage}
        switches = {f.name: getattr(server, f.name) for f in fields(cls) if f.name not in given}
        return cls(**given, **switches)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each small write leaves at once, as split
    server: Any  # the loopback base's HTTP server; .owner is the OpenAITestServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    # -- plumbing ----------------------------------------------------------------

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        recorded = RecordedRequest(self.command, self.path, headers, raw, body, raw_path=self.path)
        self.server.owner._record(recorded)
        return recorded

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        key = self.server.owner.api_key
        if key is None:
            return True
        given = self.headers.get("Authorization", "")
        if not given:
            self._send_json(
                401,
                openai_error(
                    "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                    "invalid_request_error",
                ),
            )
            return False
        if given != f"Bearer {key}":
            shown = given.removeprefix("Bearer ")
            masked = shown[:3] + "*" * max(0, len(shown) - 7) + shown[-4:]
            self._send_json(
                401,
                openai_error(
                    f"Incorrect API key provided: {masked}.",
                    "invalid_request_error",
                    "invalid_api_key",
                ),
            )
            return False
        return True

    # -- routes ------------------------------------------------------------------

    def _route(self) -> str:
        # Ignore a query string (Azure-style ?api-version=...) and a trailing slash.
        return urlsplit(self.path).path.rstrip("/")

    def do_GET(self) -> None:
        self._record()
        if self._route() != "/v1/models":
            self._not_found()
            return
        if not self._authorised():
            return
        models = self.server.owner.models or ("test-model",)
        self._send_json(
            200,
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 1700000000, "owned_by": "kairox"}
                    for m in models
                ],
            },
        )

    def do_POST(self) -> None:
        owner = self.server.owner
        recorded = self._record()
        if self._route() != "/v1/chat/completions":
            self._not_found()
            return
        if not self._authorised():
            return
        delay = owner.faults.take("delay", recorded)
        if delay is not None and owner._pause(delay.seconds):
            self.close_connection = True
            return
        failure = owner.faults.take("fail", recorded)
        if failure is not None:
            status = int(failure.error)
            message, type_, code = _STATUS_ERRORS.get(
                status, (f"HTTP {status}", "server_error", None)
            )
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = str(failure.retry_after)
            self._send_json(status, openai_error(failure.message or message, type_, code), headers)
            return
        body = recorded.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(
                400,
                openai_error(
                    "We could not parse the JSON body of your request.", "invalid_request_error"
                ),
            )
            return
        model = body.get("model")
        if owner.models is not None and model not in owner.models:
            self._send_json(
                404,
                openai_error(
                    f"The model `{model}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                ),
            )
            return
        reply = owner._next_reply()
        if not body.get("stream") or owner.ignore_stream:
            self._send_json(200, owner._completion(reply, str(model)))
            return
        options = body.get("stream_options")
        plan = _Plan.snapshot(
            owner,
            reply,
            str(model),
            include_usage=owner.include_usage
            or (isinstance(options, dict) and bool(options.get("include_usage"))),
        )
        self._stream(plan)

    def _not_found(self) -> None:
        self._send_json(
            404,
            openai_error(
                f"Invalid URL ({self.command} {self.path})", "invalid_request_error", None
            ),
        )

    # -- streaming ---------------------------------------------------------------

    def _stream(self, plan: _Plan) -> None:
        owner = self.server.owner
        if owner._pause(owner.first_byte_delay_s):
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        eol = "\r\n" if plan.crlf else "\n"
        created = int(time.time())
        completion_id = f"chatcmpl-kairox{owner._completion_number()}"
        split_sizes = itertools.cycle(_SPLIT_PATTERN)

        def write(text: str) -> None:
            data = text.encode()
            if not plan.split_bytes:
                self._chunk(data)
                return
            offset = 0
            while offset < len(data):
                size = next(split_sizes)
                self._chunk(data[offset : offset + size])
                offset += size
                # Hand the GIL over so an in-process client reads each piece on its own
                # (TCP_NODELAY sends each at once); a real sleep would only slow tests down.
                time.sleep(0)

        def event(payload: Any) -> str:
            if plan.multiline_data:
                lines = json.dumps(payload, ensure_ascii=False, indent=1).split("\n")
            else:
                lines = [json.dumps(payload, ensure_ascii=False, separators=(",", ":"))]
            return "".join(f"data: {line}{eol}" for line in lines) + eol

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": plan.model,
                "system_fingerprint": "fp_kairox",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }

        keepalive = f": keep-alive{eol}{eol}"
        if plan.keepalive:
            write(keepalive)
        write(event(chunk({"role": "assistant", "content": "", "refusal": None})))
        pieces = [
            plan.reply[i : i + plan.chunk_size] for i in range(0, len(plan.reply), plan.chunk_size)
        ]

        def cut_off() -> None:
            if plan.cut_off_mode == "end":
                self._chunk(b"")  # a clean end of body, yet no finish_reason and no [DONE]
            self.close_connection = True  # "close": hang up mid-body

        for number, piece in enumerate(pieces):
            if plan.cut_off_after is not None and number >= plan.cut_off_after:
                cut_off()
                return
            if plan.error_after is not None and number >= plan.error_after:
                write(event(openai_error(plan.error_message, "server_error", None)))
                write(f"data: [DONE]{eol}{eol}")
                self._chunk(b"")
                return
            if number and owner._pause(plan.chunk_delay_s):
                self.close_connection = True
                return
            if plan.keepalive:
                write(keepalive)
            write(event(chunk({"content": piece})))
        if plan.cut_off_after is not None and plan.cut_off_after <= len(pieces):
            cut_off()
            return
        write(event(chunk({}, "stop")))
        if plan.include_usage:
            usage = chunk({})
            usage["choices"] = []
            usage["usage"] = {
                "prompt_tokens": 1,
                "completion_tokens": len(pieces),
                "total_tokens": 1 + len(pieces),
            }
            write(event(usage))
        if not plan.finish_without_done:
            write(f"data: [DONE]{eol}{eol}")
        self._chunk(b"")  # the terminating zero-length chunk: a clean end of body

    def _chunk(self, data: bytes) -> None:
        """Write one HTTP/1.1 chunk (an empty one ends the body) and let it leave now."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class OpenAITestServer(LoopbackHTTPServer):
    """An OpenAI-compatible chat server on loopback, for tests; use as a context manager.

    :param replies: the replies, in order, one per chat request; the last one repeats
        once they run out. A single string is one reply.
    :param api_key: when set, requests must carry ``Authorization: Bearer <api_key>``
        or get OpenAI's 401 body.
    :param models: the model names served; any other gets OpenAI's 404
        ``model_not_found``. ``None`` accepts every name.
    :param chunk_size: characters of reply per content delta.

    The remaining keyword arguments set the behaviour attributes of the same name:

    * ``first_byte_delay_s``: sleep before the response headers (a slow first byte).
    * ``chunk_delay_s``: sleep between content deltas.
    * ``keepalive``: send ``: keep-alive`` comment lines around the events.
    * ``crlf``: end lines with CRLF instead of LF.
    * ``split_bytes``: write the body in odd-sized pieces that split UTF-8 sequences.
    * ``multiline_data``: spread each JSON payload over several ``data:`` lines.
    * ``cut_off_after``: stop after this many content deltas, without a
      ``finish_reason`` or [DONE]; how is ``cut_off_mode``: ``"close"`` drops the
      connection mid-body, ``"end"`` ends the body cleanly (as a timing-out proxy may).
    * ``error_after``: after this many content deltas, send an ``error`` event
      (``error_message``) and end the stream.
    * ``finish_without_done``: send the ``finish_reason`` chunk but no ``data: [DONE]``.
    * ``include_usage``: send a usage chunk with empty ``choices`` before [DONE] (also
      done when the request asks with ``stream_options``).
    * ``ignore_stream``: answer with one whole ``chat.completion`` JSON even when the
      request asked to stream, as some servers do.

    :meth:`fail` answers the next chat requests with an HTTP error (429, 500, 503...);
    lifecycle and records are :class:`~kairox.testing.loopback.LoopbackHTTPServer`'s.
    """

    handler_class = _Handler

    def __init__(
        self,
        replies: Sequence[str] | str = ("Hello from the test server.",),
        *,
        api_key: str | None = None,
        models: Sequence[str] | None = ("test-model",),
        chunk_size: int = 4,
        first_byte_delay_s: float = 0.0,
        chunk_delay_s: float = 0.0,
        keepalive: bool = False,
        crlf: bool = False,
        split_bytes: bool = False,
        multiline_data: bool = False,
        cut_off_after: int | None = None,
        cut_off_mode: str = "close",
        error_after: int | None = None,
        error_message: str = "The model crashed while generating.",
        finish_without_done: bool = False,
        include_usage: bool = False,
        ignore_stream: bool = False,
    ) -> None:
        replies = [replies] if isinstance(replies, str) else list(replies)
        if not replies:
            raise ValueError("OpenAITestServer needs at least one reply")
        if cut_off_mode not in ("close", "end"):
            raise ValueError(f"cut_off_mode must be 'close' or 'end', got {cut_off_mode!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        super().__init__()
        self.replies = replies
        self.api_key = api_key
        self.models = tuple(models) if models is not None else None
        self.chunk_size = chunk_size
        self.first_byte_delay_s = first_byte_delay_s
        self.chunk_delay_s = chunk_delay_s
        self.keepalive = keepalive
        self.crlf = crlf
        self.split_bytes = split_bytes
        self.multiline_data = multiline_data
        self.cut_off_after = cut_off_after
        self.cut_off_mode = cut_off_mode
        self.error_after = error_after
        self.error_message = error_message
        self.finish_without_done = finish_without_done
        self.include_usage = include_usage
        self.ignore_stream = ignore_stream
        self._lock = threading.Lock()
        self._served = 0
        self._completions = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: what an OpenAI client takes as its base URL."""
        return f"{self.url}/v1"

    # -- switches and records ---------------------------------------------------------------

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The ``POST .../chat/completions`` requests, in order."""
        return [r for r in self.requests if r.method == "POST" and "chat" in r.path]

    @property
    def replies_served(self) -> int:
        """How many replies have been started (streamed or sent whole)."""
        with self._lock:
            return self._served

    # -- used by the handler threads ---------------------------------------------------------

    def _next_reply(self) -> str:
        with self._lock:
            reply = self.replies[min(self._served, len(self.replies) - 1)]
            self._served += 1
            return reply

    def _completion_number(self) -> int:
        with self._lock:
            self._completions += 1
            return self._completions

    def _completion(self, reply: str, model: str) -> dict[str, Any]:
        """A whole (non-streamed) ``chat.completion``, for ``"stream": false``."""
        return {
            "id": f"chatcmpl-kairox{self._completion_number()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
