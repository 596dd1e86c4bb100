"""Server-sent events: the ``text/event-stream`` body a streaming reply arrives in.

:class:`SSEDecoder` parses it incrementally from raw bytes, so events, lines and UTF-8
sequences may be split anywhere by the network.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

_EOL = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``data`` (``data:`` lines joined by newlines) and type."""

    data: str
    event: str = "message"


class SSEDecoder:
    """An incremental parser of a ``text/event-stream`` body, fed raw bytes.

    Follows the WHATWG rules: lines end in CRLF, LF or CR; ``:`` lines are comments
    (keep-alives); ``field: value`` with one optional space after the colon; several
    ``data:`` lines in one event are joined with ``\\n``; a blank line dispatches the
    event. Lines are decoded only once complete, so a UTF-8 sequence split between
    two network reads is reassembled first. One leniency: :meth:`close` dispatches an
    event that the stream ended without its blank line, so a final ``data: [DONE]``
    counts.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no line end
        self._data: list[str] = []
        self._event = ""
        self._started = False

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Add bytes; return the events they complete."""
        self._buffer += chunk
        return self._drain(final=False)

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: flush the last line and any event left undispatched."""
        events = self._drain(final=True)
        if self._buffer:
            self._line(bytes(self._buffer), events)
            self._buffer.clear()
        self._dispatch(events)
        return events

    def _drain(self, *, final: bool) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        start = 0
        while True:
            match = _EOL.search(self._buffer, max(start, self._scanned))
            if match is None:
                self._scanned = len(self._buffer)
                break
            if match.group() == b"\r" and match.end() == len(self._buffer) and not final:
                # A CR at the very end may be the first half of a CRLF: wait for more.
                self._scanned = match.start()
                break
            self._line(bytes(self._buffer[start : match.start()]), events)
            start = match.end()
            self._scanned = start
        if start:
            del self._buffer[:start]
            self._scanned -= start
        return events

    def _line(self, raw: bytes, events: list[ServerSentEvent]) -> None:
        line = raw.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            line = line.removeprefix("\ufeff")  # the spec allows one leading BOM
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return  # a comment: keep-alive, "OPENROUTER PROCESSING", ...
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        # "id" and "retry" matter for reconnecting EventSource clients, not for us.

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            events.append(ServerSentEvent("\n".join(self._data), self._event or "message"))
        self._data = []
        self._event = ""


async def decode_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """The events of a whole body read as ``chunks``, the one it ended without its blank
    line included (:meth:`SSEDecoder.close`)."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
