"""The openai-compatible backend's server-sent events decoder, fed split bytes."""

from __future__ import annotations

import itertools

from kairox.default_plugins.openai_compatible import ServerSentEvent, SSEDecoder
from kairox.default_plugins.openai_compatible.sse import decode_events
from kairox.testing import run

SSE_BYTES = (
    "\ufeff: a comment\r\n"
    ": keep-alive\r\n"
    "\r\n"
    "event: message\r\n"
    'data: {"text":\r\n'
    'data: "Grüße 🎉"}\r\n'
    "\r\n"
    "data:no space\n"
    "\n"
    "data: cr only\r"
    "\r"
    "id: 7\n"
    "retry: 100\n"
    "event: error\n"
    "data: boom\n"
    "\n"
    "data: [DONE]"  # the stream ends without the blank line
).encode()
SSE_EVENTS = [
    ServerSentEvent('{"text":\n"Grüße 🎉"}'),
    ServerSentEvent("no space"),
    ServerSentEvent("cr only"),
    ServerSentEvent("boom", "error"),
    ServerSentEvent("[DONE]"),
]


def decode(pieces):
    decoder = SSEDecoder()
    events = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events + decoder.close()


def test_sse_decoder_whole_stream():
    assert decode([SSE_BYTES]) == SSE_EVENTS


def test_sse_decoder_byte_by_byte():
    assert decode([bytes([b]) for b in SSE_BYTES]) == SSE_EVENTS


def test_sse_decoder_every_pair_of_split_points():
    """Splits anywhere: inside CRLF, inside UTF-8 sequences, inside field names."""
    n = len(SSE_BYTES)
    for i, j in itertools.combinations(range(1, n), 2):
        pieces = [SSE_BYTES[:i], SSE_BYTES[i:j], SSE_BYTES[j:]]
        assert decode(pieces) == SSE_EVENTS, (i, j)


def test_sse_decoder_dispatches_only_on_a_blank_line():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: one\n") == []
    assert decoder.feed(b"data: two\n") == []
    assert decoder.feed(b"\n") == [ServerSentEvent("one\ntwo")]
    assert decoder.feed(b"\n\n: nothing\n\n") == []  # blank lines without data are no events
    assert decoder.close() == []


def test_decode_events_reads_a_whole_body_of_split_chunks():
    async def chunks():
        for i in range(0, len(SSE_BYTES), 5):
            yield SSE_BYTES[i : i + 5]

    async def collect():
        return [event async for event in decode_events(chunks())]

    assert run(collect()) == SSE_EVENTS
