"""Reading one chat completion's reply: its text pieces from the event stream (or from
one whole JSON completion, when a server ignores ``"stream": true``), errors a server
reports inside the reply, and a reply cut off part-way.

Once text has streamed a failure is not retried (the text shown would be repeated), so
every error here says how much arrived before it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kairox.default_plugins.openai_compatible.errors import HTTPX, error_text, reason
from kairox.default_plugins.openai_compatible.sse import ServerSentEvent, decode_events
from kairox.support.models import ModelError

if TYPE_CHECKING:
    import httpx


@dataclass
class _StreamState:
    received: int = 0  # characters of text yielded so far
    finish_reason: str | None = None
    done: bool = False


class ReplyReader:
    """Turns the 2xx streaming responses of the server at ``base_url`` into text pieces,
    raising :class:`~kairox.support.models.ModelError` for an error or a cut-off reply.

    :param timeout_s: the read timeout the client was given, named when a stream stalls.
    """

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s

    async def read(self, response: httpx.Response) -> AsyncIterator[str]:
        """The reply's text pieces, in order."""
        httpx = HTTPX.load()
        state = _StreamState()
        content_type = response.headers.get("content-type", "")
        if "application/json" in content_type:
            # The server ignored "stream": true and sent one whole completion.
            async for piece in self._read_whole(response, state):
                yield piece
            return
        try:
            async with aclosing(decode_events(response.aiter_bytes())) as events:
                async for event in events:
                    piece = self._handle(event, state)
                    if state.done:
                        return
                    if piece:
                        state.received += len(piece)
                        yield piece
        except httpx.TimeoutException as exc:
            if state.finish_reason is not None:
                return  # the reply was complete; only the [DONE] went missing
            raise self._cut_off(
                state, f"{self.base_url} sent nothing for {self.timeout_s:g} s (timeout_s)"
            ) from exc
        except httpx.HTTPError as exc:
            if state.finish_reason is not None:
                return
            raise self._cut_off(
                state, f"the connection to {self.base_url} failed ({reason(exc)})"
            ) from exc
        if state.finish_reason is None:
            raise self._cut_off(state, f"the stream from {self.base_url} ended without [DONE]")

    def _cut_off(self, state: _StreamState, why: str) -> ModelError:
        if state.received:
            return ModelError(
                f"the reply was cut off after {state.received} characters: {why}. It was "
                f"not retried, since the text already shown would be repeated"
            )
        return ModelError(f"the reply was cut off before any text arrived: {why}")

    async def _read_whole(
        self, response: httpx.Response, state: _StreamState
    ) -> AsyncIterator[str]:
        httpx = HTTPX.load()
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:
            raise self._cut_off(
                state, f"the connection to {self.base_url} failed ({reason(exc)})"
            ) from exc
        try:
            payload = json.loads(raw)
        except ValueError:
            raise ModelError(
                f"the model server at {self.base_url} sent a body that is not JSON: {raw[:200]!r}"
            ) from None
        self._raise_for_error_payload(payload, state)
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(
                f"the model server at {self.base_url} sent JSON without "
                f"choices[0].message.content: {json.dumps(payload)[:200]}"
            ) from None
        if isinstance(content, str) and content:
            yield content

    def _raise_for_error_payload(self, payload: Any, state: _StreamState) -> None:
        if not isinstance(payload, Mapping):
            return
        if payload.get("error"):
            message = error_text(payload["error"])
        elif payload.get("object") == "error":  # older vLLM: the error is the payload
            message = error_text(payload)
        else:
            return
        if state.received:
            raise ModelError(
                f"the model server at {self.base_url} reported an error after "
                f"{state.received} characters, so the reply was cut off: {message}"
            )
        raise ModelError(f"the model server at {self.base_url} reported an error: {message}")

    def _handle(self, event: ServerSentEvent, state: _StreamState) -> str | None:
        """Apply one event to ``state``; return its text, if any."""
        data = event.data.strip()
        if data == "[DONE]":
            state.done = True
            return None
        if not data:
            return None
        try:
            payload = json.loads(data)
        except ValueError:
            if event.event == "error":
                self._raise_for_error_payload({"error": data}, state)
            raise ModelError(
                f"the model server at {self.base_url} sent a stream event that is not JSON: "
                f"{data[:200]!r}"
            ) from None
        if event.event == "error" and isinstance(payload, Mapping) and "error" not in payload:
            payload = {"error": payload}
        self._raise_for_error_payload(payload, state)
        choices = payload.get("choices") if isinstance(payload, Mapping) else None
        if not isinstance(choices, list):
            return None  # e.g. a usage-only chunk
        for choice in choices:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue  # we ask for one choice; ignore others should a server send them
            if choice.get("finish_reason"):
                state.finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, Mapping) else None
            # Role-only and empty deltas carry no text; reasoning_content is not the reply.
            if isinstance(content, str) and content:
                return content
        return None
