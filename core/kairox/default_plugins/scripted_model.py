"""The built-in ``scripted`` model backend: replays prepared replies, for demos and tests.

Each call to :meth:`ScriptedModel.stream` plays the next turn of a script. A reply is
streamed in small chunks (``chunk_size`` characters, optionally ``delay_s`` apart) so the
consumer meets the same chunk boundaries a real model produces, markers split across
chunks included. A turn can also simulate a backend failure, at once or part-way
through a reply. Every prompt is recorded in :attr:`ScriptedModel.requests`.

A script file is either JSON Lines, one object per line::

    {"reply": "Hello!"}
    {"error": "the model is overloaded"}
    {"reply": "A long answer that breaks off", "fail_after_chars": 12}

or plain text, replies separated by a line holding only ``---``::

    Hello!
    ---
    Second reply,
    over two lines.

Files named ``*.jsonl``/``*.ndjson`` are JSON Lines; any other file is JSON Lines when its
first non-blank line is a JSON object with a ``reply`` or ``error`` key, else plain text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, StrictInt, StrictStr

from kairox.config.schema import PluginSettings
from kairox.plugin_host.registry import ModelBackendContext, ModelBackendSpec, registers
from kairox.support.errors import KairoxError
from kairox.support.models import ChatMessage, ModelError, check_backend_options

SEPARATOR = "---"
_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
_KEYS = frozenset({"reply", "error", "fail_after_chars"})


class ScriptError(KairoxError, ValueError):
    """A script (file or list of replies) is malformed; the message names file and line."""


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One turn of a script.

    :param reply: the text to stream (``None`` for a turn that only fails).
    :param error: when set, the turn fails with this message: at once when there is no
        reply, else once the reply (or its first ``fail_after_chars`` characters) streamed.
    :param fail_after_chars: stream this many characters of ``reply``, then fail.
    """

    reply: str | None = None
    error: str | None = None
    fail_after_chars: int | None = None


def _turn_from_mapping(entry: Mapping[str, Any], where: str) -> ScriptedTurn:
    """Validate one ``{"reply"|"error"|"fail_after_chars": ...}`` entry."""
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ScriptError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"expected 'reply', 'error' or 'fail_after_chars'"
        )
    reply = entry.get("reply")
    error = entry.get("error")
    fail_after = entry.get("fail_after_chars")
    if reply is None and error is None:
        raise ScriptError(f"{where}: expected a 'reply' or an 'error' key")
    if reply is not None and not isinstance(reply, str):
        raise ScriptError(f"{where}: 'reply' must be a string, got {type(reply).__name__}")
    if error is not None and not isinstance(error, str):
        raise ScriptError(f"{where}: 'error' must be a string, got {type(error).__name__}")
    if fail_after is not None:
        # bool is an int subclass; `true` is surely a mistake, not "fail after 1 char".
        if isinstance(fail_after, bool) or not isinstance(fail_after, int) or fail_after < 0:
            raise ScriptError(f"{where}: 'fail_after_chars' must be a whole number >= 0")
        if reply is None:
            raise ScriptError(f"{where}: 'fail_after_chars' needs a 'reply' to cut off")
    return ScriptedTurn(reply=reply, error=error, fail_after_chars=fail_after)


def _turn_from_entry(entry: str | Mapping[str, Any], where: str) -> ScriptedTurn:
    if isinstance(entry, str):
        return ScriptedTurn(reply=entry)
    if isinstance(entry, Mapping):
        return _turn_from_mapping(entry, where)
    raise ScriptError(f"{where}: expected a string or a mapping, got {type(entry).__name__}")


def _looks_like_jsonl(lines: list[str]) -> bool:
    for line in lines:
        if not line.strip():
            continue
        try:
            first = json.loads(line)
        except ValueError:
            return False
        return isinstance(first, dict) and bool({"reply", "error"} & set(first))
    return False


def _parse_jsonl(path: Path, lines: list[str]) -> list[ScriptedTurn]:
    turns: list[ScriptedTurn] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise ScriptError(f"{where}: not valid JSON ({exc})") from None
        if not isinstance(entry, dict):
            raise ScriptError(
                f'{where}: expected an object such as {{"reply": "..."}}, '
                f"got {type(entry).__name__}"
            )
        turns.append(_turn_from_mapping(entry, where))
    return turns


def _parse_text(path: Path, lines: list[str]) -> list[ScriptedTurn]:
    turns: list[ScriptedTurn] = []
    current: list[str] = []
    start = 1  # first line of the reply being collected, for error messages
    for number, line in enumerate(lines, start=1):
        if line.rstrip() == SEPARATOR:
            reply = "\n".join(current).strip("\n")
            if not reply.strip():
                raise ScriptError(
                    f"{path}:{number}: empty reply (lines {start}-{number}); "
                    f"put text between the '{SEPARATOR}' separators"
                )
            turns.append(ScriptedTurn(reply=reply))
            current, start = [], number + 1
        else:
            current.append(line)
    last = "\n".join(current).strip("\n")
    if last.strip():  # a trailing separator leaves nothing behind: that's fine
        turns.append(ScriptedTurn(reply=last))
    return turns


def load_script(path: Path | str) -> list[ScriptedTurn]:
    """Read a script file (JSON Lines or ``---``-separated text) into turns.

    :raises ScriptError: naming the file (and the line) when it is missing, unreadable,
        malformed or holds no replies.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"script file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ScriptError(f"script file {path} is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ScriptError(f"cannot read script file {path}: {exc.strerror or exc}") from None
    # splitlines() would also split on \x0c, \x1c...; replies may contain those.
    lines = text.replace("\r\n", "\n").split("\n")
    if path.suffix.lower() in _JSONL_SUFFIXES or _looks_like_jsonl(lines):
        turns = _parse_jsonl(path, lines)
    else:
        turns = _parse_text(path, lines)
    if not turns:
        raise ScriptError(f"script file {path} holds no replies")
    return turns


class ScriptedModel:
    """A model backend that streams prepared replies in order.

    :param replies: the replies, in order; an entry may also be a mapping like a JSON
        Lines entry (``{"error": ...}``, ``{"reply": ..., "fail_after_chars": N}``).
    :param script: a script file (see the module docstring), read at construction so a
        bad file fails early. Give ``replies`` or ``script``, not both.
    :param chunk_size: characters per streamed chunk.
    :param delay_s: pause between chunks, to make a demo look like a live model.
    """

    name = "scripted"

    def __init__(
        self,
        replies: Sequence[str | Mapping[str, Any]] | None = None,
        *,
        script: Path | str | None = None,
        chunk_size: int = 7,
        delay_s: float = 0.0,
    ) -> None:
        if replies is not None and script is not None:
            raise ScriptError("give the scripted backend `replies` or `script`, not both")
        if isinstance(replies, str | bytes):
            # A lone string is a Sequence[str] too; replaying it letter by letter helps nobody.
            raise ScriptError("`replies` must be a list of replies, not a single string")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ScriptError(f"chunk_size must be a whole number >= 1, got {chunk_size!r}")
        if delay_s < 0:
            raise ScriptError(f"delay_s must be >= 0, got {delay_s!r}")
        if script is not None:
            self.turns = load_script(script)
        else:
            self.turns = [
                _turn_from_entry(entry, f"replies[{index}]")
                for index, entry in enumerate(replies or ())
            ]
        self.script = Path(script) if script is not None else None
        self.chunk_size = chunk_size
        self.delay_s = delay_s
        #: The messages of every ``stream`` call, in order (one list per call).
        self.requests: list[list[ChatMessage]] = []
        #: The ``model`` and ``max_tokens`` of every call, parallel to :attr:`requests`.
        self.calls: list[dict[str, Any]] = []

    @property
    def used(self) -> int:
        """How many turns have been played."""
        return len(self.requests)

    @property
    def remaining(self) -> int:
        """How many turns are left."""
        return max(0, len(self.turns) - self.used)

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str = "scripted",
        max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        """Stream the next reply in chunks; raise :class:`ModelError` as the script says."""
        index = len(self.requests)
        if index >= len(self.turns):
            source = f" from {self.script}" if self.script else ""
            raise ModelError(
                f"the script has no more replies ({index} used{source}); give the "
                f"scripted backend more replies (a longer `replies` list or script file)"
            )
        self.requests.append(list(messages))
        self.calls.append({"model": model, "max_tokens": max_tokens})
        turn = self.turns[index]
        if turn.reply is None:
            raise ModelError(f"scripted failure at turn {index + 1}: {turn.error}")

        text = turn.reply
        if turn.fail_after_chars is not None:
            text = text[: turn.fail_after_chars]
        for offset in range(0, len(text), self.chunk_size):
            if offset:
                # Always give the loop a turn, as a network backend would; this is also
                # where a consumer's cancellation lands.
                await asyncio.sleep(self.delay_s)
            yield text[offset : offset + self.chunk_size]

        if turn.fail_after_chars is not None or turn.error is not None:
            reason = turn.error or "the connection was lost"
            raise ModelError(
                f"scripted failure at turn {index + 1} after {len(text)} characters: {reason}; "
                f"the reply was cut off"
            )


def build_scripted_model(**options: Any) -> ScriptedModel:
    """The registry factory: ``replies``, ``script``, ``chunk_size``, ``delay_s``."""
    check_backend_options("scripted", options, {"replies", "script", "chunk_size", "delay_s"})
    return ScriptedModel(options.pop("replies", None), **options)


class ScriptedSettings(PluginSettings):
    """The keys of ``[profiles.<name>]`` this backend owns (``kairox chat --script`` overrides)."""

    script: StrictStr | None = None
    replies: list[StrictStr] | None = None
    chunk_size: StrictInt = Field(default=7, ge=1)
    delay_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)


def _from_profile(ctx: ModelBackendContext) -> ScriptedModel:
    settings = ctx.settings if ctx.settings is not None else ScriptedSettings()
    options = {k: v for k, v in settings.model_dump().items() if v is not None}
    if "script" in ctx.options or "replies" in ctx.options:
        # Given for this call: it replaces the profile's replies or script, not joins them.
        options.pop("script", None)
        options.pop("replies", None)
    options.update(ctx.options)
    return build_scripted_model(**options)


kairox_register_model_backends = registers(
    ModelBackendSpec(
        name="scripted",
        factory=_from_profile,
        description="Replays prepared replies (a list or a script file); for demos and tests.",
        config_model=ScriptedSettings,
    )
)
