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
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from kairox.errors import KairoxError
from kairox.memory.approvals import MAX_PROPOSAL_CHARS, Proposer
from kairox.memory.marker_rules import SCOPES

if TYPE_CHECKING:
    from kairox.context.assembler import Assembly
    from kairox.facade import AppFacade
    from kairox.memory.store import MemoryRecord
    from kairox.retrieval import FusedHit, RetrievalResult

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
MAX_FILTER_FIELDS: Final = 32
MEMORY_SCOPES: Final = SCOPES
VIA: Final = "mcp"
_PENDING_NOTE: Final = (
    "It waits for the user: they approve it in `kairox tui`, the `kairox serve` page or with "
    "`kairox memory approve {id}`. Until then it is not used and not listed by `memories`."
)


class ToolInputError(KairoxError, ValueError):
    """A tool argument is not valid; the message tells the model what to send instead."""


def parse_filter(value: Any) -> dict[str, Any]:
    """An equality filter from a JSON object (or its JSON text); anything else is refused.

    Accepted: ``{"field": value}`` where value is a string, number or boolean, or a list of
    them (any of). Operators (``$gt``...) and nested objects are not supported yet.
    """
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ToolInputError(
                f"filter is not valid JSON ({exc.msg} at character {exc.pos}); send an object "
                'such as {"path": "docs/intro.md"}'
            ) from None
    if not isinstance(value, Mapping):
        raise ToolInputError(
            f"filter must be a JSON object of field: value pairs, not {type(value).__name__}"
        )
    if len(value) > MAX_FILTER_FIELDS:
        raise ToolInputError(f"filter has {len(value)} fields; at most {MAX_FILTER_FIELDS}")
    filters: dict[str, Any] = {}
    for field, wanted in value.items():
        if not isinstance(field, str) or not field or field.startswith("$"):
            raise ToolInputError(
                f"filter field {field!r} is not supported: only plain field names with "
                "equality are (operators such as $gt are not available yet)"
            )
        if isinstance(wanted, list):
            if not wanted or not all(_is_scalar(item) for item in wanted):
                raise ToolInputError(
                    f"filter field {field!r}: a list means 'any of' and must hold strings, "
                    "numbers or booleans"
                )
        elif not _is_scalar(wanted):
            raise ToolInputError(
                f"filter field {field!r}: the value must be a string, number, boolean or a "
                f"list of them, not {type(wanted).__name__}"
            )
        filters[field] = wanted
    return filters


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) and not (
        isinstance(value, float) and value != value  # NaN matches nothing
    )


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

    @property
    def tainted_by(self) -> list[str]:
        """The sources whose text this server has handed the agent so far."""
        return list(self._served)

    def _profile(self, profile: str | None) -> str:
        from kairox.config import ConfigError

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
        from kairox.session import open_session

        prompt = _text("prompt", prompt, MAX_PROMPT_CHARS)
        name = self._profile(profile)
        session_id = _session(session) or self.session_id
        async with open_session(self.facade, session_id, profile=name) as live:
            assembly = await live.assemble(prompt)
        self._served.update(dict.fromkeys(assembly.tainted_by))
        return assembly_json(assembly, profile=name, session=session_id)

    # -- memory -----------------------------------------------------------------------

    def _proposer(self) -> Proposer:
        """This server's session, as the proposer of a memory or of a deletion."""
        return Proposer(self.session_id, self.facade.workspace_id, VIA, self.tainted_by)

    def remember(self, scope: str, body: str, key: str | None = None) -> dict[str, Any]:
        scope = _scope(scope, MEMORY_SCOPES)
        body = _text("body", body, MAX_PROPOSAL_CHARS)
        outcome = self.facade.memory.propose(scope, body, key=key, by=self._proposer())
        if outcome.rejected:
            raise ToolInputError(f"not remembered: {outcome.rejected[0][1]}")
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
