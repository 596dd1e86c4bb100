"""What the MCP tools do, in plain Python: validate the arguments, call the facade, answer JSON.

Nothing here imports the ``mcp`` SDK; :mod:`kairox.mcp.server` registers these methods as
tools. A bad argument raises :class:`ToolInputError` with a message written for the model
that sent it (what was wrong, what to send instead); the server turns it into an MCP tool
error, so a hostile or confused client gets an answer and the server keeps running.

Memory written through these tools goes through :class:`~kairox.memory.approvals.MemoryApprovals`,
the path a ``<memory>`` marker takes: session memories are kept, user and workspace ones wait
for the user; their provenance says ``"via": "mcp"``. The injection rule of a chat turn
applies: once this server has handed the agent retrieved text (``search``, ``context``), its
proposals are tainted by those sources (``workspace:<name>``, ``knowledge_base:<name>``),
carry the injection warning, and a session proposal waits for approval too. What else the
agent read (its own tools, web pages) Kairox cannot see; user and workspace memories wait
for a person either way.

An MCP client keeps its conversation in a Kairox session with ``append_messages`` (what
was said, as history) and ``record_reply`` (its model's reply to the last ``context``
prompt, through a chat turn's pipeline: markers, approval with this server's taint,
automatic compaction).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from kairox.memory.approvals import Proposer
from kairox.memory.marker_rules import SCOPES
from kairox.retrieval.filters import FilterError
from kairox.retrieval.filters import parse_filter as parse_filter_language
from kairox.runtime.session_recording import PendingPrompts
from kairox.store.messages import SessionMessage, messages_from
from kairox.support.errors import KairoxError

if TYPE_CHECKING:
    from kairox.context.assembler import Assembly
    from kairox.memory.store import MemoryRecord
    from kairox.retrieval import FusedHit, RetrievalResult
    from kairox.retrieval.filters import FilterExpr
    from kairox.runtime.facade import AppFacade
    from kairox.runtime.session import AppendResult, CompactionResult, TurnResult

__all__ = [
    "MAX_K",
    "MAX_QUERY_CHARS",
    "MEMORY_SCOPES",
    "KairoxTools",
    "ToolInputError",
    "parse_filter",
]

MAX_K: Final = 50
# A search query or a prompt is a question, not a document: longer text is a mistake.
MAX_QUERY_CHARS: Final = 4000
MAX_PROMPT_CHARS: Final = 32000
# One call appends at most this many messages, each at most this long.
MAX_MESSAGES: Final = 1000
MAX_MESSAGE_CHARS: Final = 100_000
MEMORY_SCOPES: Final = SCOPES
VIA: Final = "mcp"
_PENDING_NOTE: Final = (
    "It waits for the user: they approve it in `kairox tui`, the `kairox serve` page or with "
    "`kairox memory approve {id}`. Until then it is not used and not listed by `memories`."
)


class ToolInputError(KairoxError, ValueError):
    """A tool argument is not valid; the message tells the model what to send instead."""


def parse_filter(value: Any) -> FilterExpr | None:
    """The ``filter`` argument in Kairox's one filter language, as ``kairox search --filter``
    takes it: a JSON object (``{"year": {"$gte": 2020}}``), its JSON text, or the text form
    (``year >= 2020 and lang in (en, de)``); ``None`` for none. Anything else is refused
    with the reason and the bad node's path (:mod:`kairox.retrieval.filters`).
    """
    if value is None:
        return None
    if not isinstance(value, Mapping | str):
        raise ToolInputError(
            'filter must be a JSON object such as {"path": "docs/intro.md"} or the text '
            f"form such as 'year >= 2020 and not draft', not {type(value).__name__}"
        )
    try:
        return parse_filter_language(value)
    except FilterError as exc:
        raise ToolInputError(str(exc)) from None


def _text(name: str, value: Any, limit: int) -> str:
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ToolInputError(f"{name} is empty")
    if len(value) > limit:
        raise ToolInputError(f"{name} is {len(value)} characters long; at most {limit}")
    return value


class KairoxTools:
    """The tools one MCP server offers over one workspace.

    :param facade: the workspace's facade; its sources are built once and reused.
    :param session_id: the session this server's context and session memories use when a
        call names none; one per server process by default.
    """

    def __init__(self, facade: AppFacade, *, session_id: str | None = None) -> None:
        self.facade = facade
        self.session_id = session_id or f"mcp-{uuid.uuid4().hex[:12]}"
        # What unvetted text this server has handed the agent, in first-served order.
        self._served: dict[str, None] = {}
        self._pending = PendingPrompts()

    @property
    def tainted_by(self) -> list[str]:
        """The sources whose text this server has handed the agent so far."""
        return list(self._served)

    def _profile(self, profile: str | None) -> str:
        from kairox.config.errors import ConfigError

        try:
            return self.facade.resolve_profile(profile)
        except ConfigError as exc:
            known = ", ".join(self.facade.config.profiles)
            raise ToolInputError(f"{exc}; known profiles: {known}") from None

    # -- retrieval --------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 8,
        profile: str | None = None,
        filter: Any = None,
        by_file: bool = False,
    ) -> dict[str, Any]:
        query = _text("query", query, MAX_QUERY_CHARS)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ToolInputError(f"k must be a whole number from 1 to {MAX_K}, not {k!r}")
        if not isinstance(by_file, bool):
            raise ToolInputError(f"by_file must be true or false, not {by_file!r}")
        name = self._profile(profile)
        result = self.facade.search_sync(
            query, profile=name, k=k, filters=parse_filter(filter), by_file=by_file
        )
        for hit in result.hits:
            for found in hit.sources:
                group = result.groups.get(found.source, "knowledge_base")
                self._served[f"{group}:{found.source}"] = None
        return result_json(result, query=query, profile=name)

    async def context(
        self, prompt: str, profile: str | None = None, session: str | None = None
    ) -> dict[str, Any]:
        from kairox.runtime.session import open_session

        prompt = _text("prompt", prompt, MAX_PROMPT_CHARS)
        name = self._profile(profile)
        session_id = _session(session) or self.session_id
        async with open_session(self.facade, session_id, profile=name) as live:
            assembly = await live.assemble(prompt)
        self._served.update(dict.fromkeys(assembly.tainted_by))
        self._pending.asked(session_id, prompt, assembly)
        return assembly_json(assembly, profile=name, session=session_id)

    def recall(self, query: str, k: int = 10, session: str | None = None) -> dict[str, Any]:
        """Earlier messages the session may recall (the ``[recall]`` table's scope)."""
        from kairox.recall import recalled_json

        query = _text("query", query, MAX_QUERY_CHARS)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ToolInputError(f"k must be a whole number from 1 to {MAX_K}, not {k!r}")
        session_id = _session(session) or self.session_id
        found = self.facade.recall(query, session_id=session_id, k=k)
        if any(m.tool_output for turn in found for m in turn.messages):
            self._served["tool output"] = None  # recalled, it is as unvetted as it was
        return {"query": query, "session": session_id, "hits": recalled_json(found)}

    # -- sessions ---------------------------------------------------------------------

    async def append_messages(
        self, messages: Any, session: str | None = None, profile: str | None = None
    ) -> dict[str, Any]:
        if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
            raise ToolInputError(
                f"messages must be a list of 1 to {MAX_MESSAGES} objects with role and content"
            )
        checked = messages_from(messages)
        for number, message in enumerate(checked, start=1):
            if len(message.content) > MAX_MESSAGE_CHARS:
                raise ToolInputError(
                    f"message {number}: content is {len(message.content)} characters long; "
                    f"at most {MAX_MESSAGE_CHARS}"
                )
        session_id = _session(session) or self.session_id
        result = await self.facade.append_messages(
            session_id, checked, profile=self._profile(profile)
        )
        return append_json(result, session=session_id)

    async def record_reply(
        self,
        reply: str,
        prompt: str | None = None,
        session: str | None = None,
        profile: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        from kairox.runtime.session import open_session

        if not isinstance(reply, str) or len(reply) > MAX_MESSAGE_CHARS:
            raise ToolInputError(
                f"reply must be a string of at most {MAX_MESSAGE_CHARS} characters"
            )
        if prompt is not None:
            prompt = _text("prompt", prompt, MAX_PROMPT_CHARS)
        session_id = _session(session) or self.session_id
        asked, assembly = self._pending.for_reply(session_id, prompt)
        async with open_session(self.facade, session_id, profile=self._profile(profile)) as live:
            result = await live.record_reply(
                SessionMessage("assistant", reply),
                prompt=asked,
                assembly=assembly,
                model=model,
                tainted_by=self.tainted_by,
            )
        self._pending.answered(session_id)
        return reply_json(result, session=session_id)

    # -- memory -----------------------------------------------------------------------

    def _proposer(self) -> Proposer:
        """This server's session, as the proposer of a memory or of a deletion."""
        return Proposer(self.session_id, self.facade.workspace_id, VIA, self.tainted_by)

    def remember(self, scope: str, body: str, key: str | None = None) -> dict[str, Any]:
        scope = _scope(scope, MEMORY_SCOPES)
        body = _text("body", body, self.facade.memory.limits.max_body_chars)
        outcome = self.facade.memory.propose(scope, body, key=key, by=self._proposer())
        if outcome.rejected:
            raise ToolInputError(f"not remembered: {outcome.rejected[0][1]}")
        if outcome.merged:
            record = outcome.merged[0]
            return {
                "status": "merged",
                "message": f"Already {'known' if record.status == 'approved' else 'proposed'}: "
                f"this restates {record.scope} memory #{record.id}, so nothing new was queued.",
                "memory": memory_json(record),
            }
        if outcome.accepted:
            record = outcome.accepted[0]
            return {
                "status": "accepted",
                "message": "Kept as a session memory: it is in this session's context from now on.",
                "memory": memory_json(record),
            }
        record = outcome.pending[0]
        why = ""
        if scope == "session":
            why = (
                "Held because this session has read retrieved text ("
                + ", ".join(self.tainted_by)
                + "), which may carry instructions that are not the user's. "
            )
        return {
            "status": "pending",
            "message": f"Proposed as a {scope} memory. " + why + _PENDING_NOTE.format(id=record.id),
            "memory": memory_json(record),
        }

    def memories(self, scope: str | None = None, query: str | None = None) -> dict[str, Any]:
        if scope is not None:
            scope = _scope(scope, MEMORY_SCOPES)
        needle = _text("query", query, MAX_QUERY_CHARS).casefold() if query is not None else None
        if scope == "session":
            found = self.facade.memory.store.list(scope="session", session_id=self.session_id)
        else:
            found = self.facade.memories(scope=scope)
        if needle is not None:
            found = [
                r
                for r in found
                if needle in r.body.casefold() or needle in (r.key or "").casefold()
            ]
        pending = [r for r in self.facade.memories(pending=True) if scope in (None, r.scope)]
        return {
            "memories": [memory_json(r) for r in found],
            "count": len(found),
            "pending_count": len(pending),
        }

    def forget(self, key: str, scope: str | None = None) -> dict[str, Any]:
        key = _text("key", key, 256)
        if scope is not None:
            scope = _scope(scope, ("user", "workspace"))
        request = self.facade.memory.propose_forget(key, scope=scope, by=self._proposer())
        return {
            "status": "pending",
            "message": f"Asked the user to forget {request.scope} memory {request.key!r}. "
            + _PENDING_NOTE.format(id=request.id).replace("not listed by", "still listed by"),
            "request": memory_json(request),
        }

    def memories_resource(self, scope: str) -> str:
        """The approved memories of one scope, as the JSON text of a resource."""
        return json.dumps(self.memories(scope)["memories"], ensure_ascii=False, indent=2)


def _scope(value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ToolInputError(f"unknown scope {value!r}; use one of: {', '.join(allowed)}")
    return value


def _session(value: Any) -> str | None:
    if value is None:
        return None
    value = _text("session", value, 128)
    if not all(ch.isalnum() or ch in "-_.:" for ch in value):
        raise ToolInputError("session may hold letters, digits and - _ . : only")
    return value


# -- JSON shapes --------------------------------------------------------------------------


def hit_json(rank: int, hit: FusedHit) -> dict[str, Any]:
    """One fused hit: where it is, which sources found it at which rank, and its text."""
    metadata = dict(hit.metadata)
    shaped: dict[str, Any] = {
        "rank": rank,
        "score": round(hit.score, 6),
        "uri": hit.uri,
        "id": hit.id,
        "found_by": [{"source": p.source, "rank": p.rank} for p in hit.sources],
        "text": hit.text,
    }
    lines = _lines(metadata)
    if lines is not None:
        shaped["lines"] = lines
    if "page" in metadata:
        shaped["page"] = metadata["page"]
    shaped["metadata"] = metadata
    return shaped


def _lines(metadata: Mapping[str, Any]) -> list[int] | None:
    start = metadata.get("line_start", metadata.get("start_line"))
    end = metadata.get("line_end", metadata.get("end_line"))
    if isinstance(start, int) and isinstance(end, int):
        return [start, end]
    lines = metadata.get("lines")
    if isinstance(lines, list | tuple) and len(lines) == 2:
        return [int(lines[0]), int(lines[1])]
    return None


def result_json(result: RetrievalResult, *, query: str, profile: str) -> dict[str, Any]:
    return {
        "query": query,
        "profile": profile,
        "hits": [hit_json(rank, hit) for rank, hit in enumerate(result.hits, start=1)],
        "sources": [
            {
                "source": r.source,
                "status": str(r.status),
                "hits": r.hit_count,
                "latency_ms": round(r.latency_ms, 1),
                **({"error": r.error} if r.error else {}),
            }
            for r in result.reports
        ],
    }


def assembly_json(assembly: Assembly, *, profile: str, session: str) -> dict[str, Any]:
    trace = assembly.trace()
    return {
        "profile": profile,
        "session": session,
        "messages": assembly.openai_messages(),
        "budget": assembly.budget,
        "used_tokens": assembly.used_tokens,
        "sources": trace["sources"],
    }


def compaction_json(result: CompactionResult) -> dict[str, Any]:
    return {"status": result.status, "reason": result.reason, "summarizer": result.summarizer}


def append_json(result: AppendResult, *, session: str) -> dict[str, Any]:
    return {
        "session": session,
        "appended": len(result.event_ids),
        "compactions": [compaction_json(c) for c in result.compactions],
    }


def reply_json(result: TurnResult, *, session: str) -> dict[str, Any]:
    proposals = result.proposals
    return {
        "session": session,
        "turn_id": result.turn_id,
        "text": result.text,
        "memories": {
            "accepted": [memory_json(r) for r in proposals.accepted],
            "pending": [memory_json(r) for r in proposals.pending],
            "rejected": [{"marker": raw, "reason": why} for raw, why in proposals.rejected],
        },
        "compaction": None if result.compaction is None else compaction_json(result.compaction),
    }


def memory_json(record: MemoryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "scope": record.scope,
        "key": record.key,
        "body": record.body,
        "status": record.status,
        "updated_at": record.updated_at,
        "via": record.provenance.get("via"),
        "tainted_by": record.provenance.get("tainted_by", []),
    }
