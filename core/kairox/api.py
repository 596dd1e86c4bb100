"""The Python API: ``kairox.open()`` and the :class:`Kairox` handle it returns.

Ten lines from a script to a prompt::

    import kairox

    kx = kairox.open("~/my-project")
    kx.index()
    for hit in kx.search("where do we retry failed uploads", k=5).hits:
        print(hit.uri, hit.score)
    assembly = kx.context("how do uploads retry?")
    openai_client.chat.completions.create(model="gpt-4o", messages=assembly.openai_messages())

An agent loop that calls its model itself keeps its conversation in Kairox::

    ctx = kx.context(user_text, session="chat-1")         # the prompt, nothing recorded
    reply = call_your_model(ctx.openai_messages())
    kx.record_reply(reply, session="chat-1")               # the prompt and the reply, once

Every verb has an ``async`` twin (``aindex``, ``asearch``, ``acontext``,
``arecord_reply``, ...) for callers that run an event loop. The handle is a thin layer over :class:`~kairox.runtime.facade.AppFacade`: the
same sources, stores and approval flow as the CLI, the TUI and the MCP server, so a
memory proposed here waits for the user in ``kairox memory list --pending`` like one a
model proposed in a chat.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack

from kairox.memory.marker_rules import SCOPES_WIDEST_FIRST
from kairox.runtime.search_options import checked_query
from kairox.runtime.session_recording import PendingPrompts
from kairox.store.messages import (
    RecordedMessage,
    SessionMessage,
    SessionSummary,
    read_messages,
    session_summaries,
)
from kairox.support.blocking import blocking_twin
from kairox.support.closing import ClosedOnExit
from kairox.support.errors import KairoxError

if TYPE_CHECKING:
    from kairox.context.assembler import Assembly
    from kairox.memory.store import MemoryRecord
    from kairox.retrieval import RetrievalResult
    from kairox.runtime.facade import AppFacade, SearchOptions
    from kairox.runtime.session import AppendResult, TurnResult
    from kairox.workspace.rag_index import IndexStats

__all__ = ["Kairox", "KairoxApiError", "MemoryProposal", "open"]

ProposalStatus = Literal["accepted", "pending", "merged", "rejected"]


class KairoxApiError(KairoxError, RuntimeError):
    """The API was called in a way that cannot work; the message says what to call instead."""


@dataclass(frozen=True)
class MemoryProposal:
    """What became of one proposed memory.

    ``accepted``: a session memory, kept at once. ``pending``: a user or workspace memory
    waiting for the user (``kairox memory approve ID``). ``merged``: it restated a pending or
    approved memory (``record``), so nothing new was kept. ``rejected``: not valid, or over a
    ``[memory]`` bound; ``reason`` says why.
    """

    status: ProposalStatus
    record: MemoryRecord | None = None
    reason: str | None = None


def open(
    path: str | Path | None = None,
    profile: str | None = None,
    *,
    config_path: str | Path | None = None,
    state_dir: str | Path | None = None,
) -> Kairox:
    """Open the workspace at ``path`` (its ``kairox.toml``, else defaults).

    The root is the nearest folder at or above ``path`` holding ``kairox.toml``, else
    ``path`` itself; with no ``path``, the current folder's workspace as ``kairox search``
    finds it (``kairox.toml``, else the git root, else the folder).

    :param profile: the profile (name or alias) searches and context use by default.
    :param config_path: a ``kairox.toml`` to use instead of searching upwards from ``path``.
    :param state_dir: where state lives instead of ``$KAIROX_HOME``.
    """
    from kairox.runtime.facade import AppFacade

    folder = Path(path if path is not None else Path.cwd()).expanduser()
    if not folder.is_dir():
        raise KairoxApiError(f"{str(folder)!r} is not a folder; pass the workspace's folder")
    facade = AppFacade(
        cwd=folder,
        config_path=Path(config_path).expanduser() if config_path is not None else None,
        state_dir=Path(state_dir).expanduser() if state_dir is not None else None,
        root_given=path is not None,
    )
    return Kairox(facade, profile=profile)


class Kairox(ClosedOnExit):
    """One workspace: index it, search it, assemble prompts, propose memories.

    :param facade: the application facade it works through.
    :param profile: the default profile for :meth:`search` and :meth:`context`; checked now,
        so a typo fails here with a did-you-mean rather than on the first search.
    :param session: the session id :meth:`context` and session memories use by default;
        a fresh one per handle.
    """

    def __init__(
        self, facade: AppFacade, *, profile: str | None = None, session: str | None = None
    ) -> None:
        self.facade = facade
        self.profile = facade.resolve_profile(profile)
        self.session = session or f"api-{uuid.uuid4().hex[:12]}"
        self._pending = PendingPrompts()

    def __repr__(self) -> str:
        return f"Kairox({str(self.facade.workspace_root)!r}, profile={self.profile!r})"

    def close(self) -> None:
        """Close the sources and the database the handle opened (the next call reopens them)."""
        self.facade.close()

    @property
    def workspace_root(self) -> Path:
        return self.facade.workspace_root

    # -- index ------------------------------------------------------------------------

    def index(
        self, *, wait: bool = True, progress: Callable[[str, int, int], None] | None = None
    ) -> IndexStats:
        """Index the workspace's files incrementally (what ``kairox index`` does).

        An embedding model the run had to load is released at its end, to bound the
        run's memory; the next search loads it again (a fraction of a second from the
        compiled-model cache). Search once first to keep it loaded throughout."""
        return self.facade.index_workspace(wait=wait, progress=progress)

    async def aindex(
        self, *, wait: bool = True, progress: Callable[[str, int, int], None] | None = None
    ) -> IndexStats:
        """:meth:`index` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.index, wait=wait, progress=progress)

    # -- search -----------------------------------------------------------------------

    def search(self, query: str, **options: Unpack[SearchOptions]) -> RetrievalResult:
        """One fused ranking over the workspace and the profile's knowledge bases.

        ``result.hits`` are best first, each with ``sources`` (every source's rank);
        ``result.reports`` has one status per source. ``options`` are
        :class:`~kairox.runtime.search_options.SearchOptions` (``k``, ``filters``, ``profile``, ``fusion``,
        ``only``, ...); the profile is this handle's unless given. It works inside a running
        event loop too (a notebook), which waits meanwhile; ``await`` :meth:`asearch` to
        keep the loop running.
        """
        return self.facade.search_sync(checked_query(query), **self._search_options(options))

    async def asearch(self, query: str, **options: Unpack[SearchOptions]) -> RetrievalResult:
        """:meth:`search` for ``async`` callers."""
        return await self.facade.search(checked_query(query), **self._search_options(options))

    def _search_options(self, options: SearchOptions) -> SearchOptions:
        return {**options, "profile": options.get("profile") or self.profile}

    # -- context ----------------------------------------------------------------------

    async def acontext(
        self, prompt: str, *, session: str | None = None, profile: str | None = None
    ) -> Assembly:
        """The prompt a turn with ``prompt`` would send, inside the profile's budget.

        ``assembly.messages`` are :class:`~kairox.support.models.ChatMessage` objects;
        ``assembly.openai_messages()`` gives them as OpenAI chat dicts; ``assembly.trace()``
        the per-source token accounting. Nothing is recorded. ``context`` blocks: inside
        a running event loop (a notebook) it runs on a worker thread while the loop
        waits; ``await`` :meth:`acontext` to keep the loop running.
        """
        from kairox.runtime.session import open_session

        session = session or self.session
        async with open_session(self.facade, session, profile=profile or self.profile) as live:
            assembly = await live.assemble(prompt)
        self._pending.asked(session, prompt, assembly)
        return assembly

    context = blocking_twin(acontext)

    # -- sessions ---------------------------------------------------------------------

    async def aappend_messages(
        self,
        messages: Iterable[SessionMessage | Mapping[str, Any]],
        *,
        session: str | None = None,
        markers: bool = False,
        profile: str | None = None,
    ) -> AppendResult:
        """Append messages to a session's history (this handle's session by default).

        Each is a :class:`~kairox.store.messages.SessionMessage` or a dict with ``role``
        (``user``, ``assistant``, ``system``, ``tool``), ``content`` and optional ``name``
        (the speaker, or the tool) and ``time`` (ISO 8601). All are checked before any is
        written and a :class:`~kairox.store.messages.MessageError` names the first bad one;
        then they are appended in one transaction, and the automatic compaction runs as
        it would have in a live chat (in ``profile``'s window; this handle's by default).
        ``<memory>`` markers in assistant messages are
        kept verbatim unless ``markers=True`` (then they are proposed, as in a chat).
        ``append_messages`` blocks: inside a running event loop (a notebook) it runs on a
        worker thread while the loop waits; ``await`` :meth:`aappend_messages` to keep
        the loop running.
        """
        return await self.facade.append_messages(
            session or self.session, messages, profile=profile or self.profile, markers=markers
        )

    append_messages = blocking_twin(aappend_messages)

    async def arecord_reply(
        self,
        reply: str,
        *,
        session: str | None = None,
        prompt: str | None = None,
        name: str | None = None,
        time: str | None = None,
        model: str | None = None,
        tainted_by: Sequence[str] = (),
        profile: str | None = None,
    ) -> TurnResult:
        """Record your model's reply as a Kairox chat turn would.

        ``<memory>`` markers are stripped from it (``result.text`` is what is kept) and
        proposed through the approval flow; a proposal is flagged as possible injection
        when the prompt held unvetted text (tool output, retrieved text) or
        ``tainted_by`` names some. Then the session compacts if the next turn would
        overflow ``profile``'s window (this handle's by default; ``result.compaction``).
        While another turn is being recorded in the session,
        :class:`~kairox.runtime.session.SessionBusyError` is raised.

        The turn's user message is recorded exactly once: it is ``prompt`` if given,
        else the prompt of this session's last :meth:`context` call on this handle that
        no reply was recorded for (whose assembly also gives the reply its taint); it is
        not recorded again when it is already the session's last message (appended with
        :meth:`append_messages`, say). With neither, the reply answers the session's
        last message. ``record_reply`` blocks: inside a running event loop (a notebook)
        it runs on a worker thread while the loop waits; ``await`` :meth:`arecord_reply`
        to keep the loop running.
        """
        from kairox.runtime.session import open_session

        session = session or self.session
        asked, assembly = self._pending.for_reply(session, prompt)
        async with open_session(self.facade, session, profile=profile or self.profile) as live:
            result = await live.record_reply(
                SessionMessage("assistant", reply, name, time),
                prompt=asked,
                assembly=assembly,
                model=model,
                tainted_by=tainted_by,
            )
        self._pending.answered(session)
        return result

    record_reply = blocking_twin(arecord_reply)

    def messages(self, session: str | None = None) -> list[RecordedMessage]:
        """The messages recorded in a session, oldest first (``r.message.role``,
        ``.content``, ``.name``, ``.time``; ``r.when``: said, else recorded)."""
        return read_messages(self.facade.events, session or self.session)

    def sessions(self) -> list[SessionSummary]:
        """This workspace's sessions with messages, the most recently active first."""
        return session_summaries(self.facade.events, self.facade.workspace_id)

    # -- memory -----------------------------------------------------------------------

    def memories(self, scope: str | None = None, *, pending: bool = False) -> list[MemoryRecord]:
        """Approved memories this workspace sees (user + workspace), or pending proposals.

        ``scope="session"`` lists this workspace's session memories.
        """
        if scope is not None and scope not in SCOPES_WIDEST_FIRST:
            shown = ", ".join(repr(s) for s in SCOPES_WIDEST_FIRST)
            raise KairoxApiError(f"unknown scope {scope!r}; use one of {shown}")
        return self.facade.memories(scope=scope, pending=pending)

    def propose_memory(
        self,
        scope: str,
        body: str,
        *,
        key: str | None = None,
        session: str | None = None,
        tainted_by: Sequence[str] = (),
    ) -> MemoryProposal:
        """Propose a memory through the approval flow a ``<memory>`` marker goes through.

        Session memories are kept at once; user and workspace memories wait for the user
        (the TUI, ``kairox serve`` or ``kairox memory approve``). The proposal's provenance
        says it came from the Python API. ``tainted_by`` names what unvetted text the
        caller's model read before proposing (``["tool output"]``, ``["web page"]``): the
        proposal then carries the injection warning, and a session one waits too.
        """
        from kairox.memory.approvals import Proposer

        proposer = Proposer(session or self.session, self.facade.workspace_id, "api", tainted_by)
        outcome = self.facade.memory.propose(scope, body, key=key, by=proposer)
        if outcome.accepted:
            return MemoryProposal("accepted", outcome.accepted[0])
        if outcome.pending:
            return MemoryProposal("pending", outcome.pending[0])
        if outcome.merged:
            return MemoryProposal("merged", outcome.merged[0])
        return MemoryProposal("rejected", reason=outcome.rejected[0][1])
