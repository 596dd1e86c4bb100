"""The Python API: ``kairox.open()`` and the :class:`Kairox` handle it returns.

Ten lines from a script to a prompt::

    import kairox

    kx = kairox.open("~/my-project")
    kx.index()
    for hit in kx.search("where do we retry failed uploads", k=5).hits:
        print(hit.uri, hit.score)
    assembly = kx.context("how do uploads retry?")
    openai_client.chat.completions.create(model="gpt-4o", messages=assembly.openai_messages())

Every verb has an ``async`` twin (``aindex``, ``asearch``, ``acontext``) for callers that
run an event loop. The handle is a thin layer over :class:`~kairox.facade.AppFacade`: the
same sources, stores and approval flow as the CLI, the TUI and the MCP server, so a
memory proposed here waits for the user in ``kairox memory list --pending`` like one a
model proposed in a chat.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Unpack

from kairox.errors import KairoxError
from kairox.memory.marker_rules import SCOPES_WIDEST_FIRST

if TYPE_CHECKING:
    from kairox.context.assembler import Assembly
    from kairox.facade import AppFacade, SearchOptions
    from kairox.memory.store import MemoryRecord
    from kairox.retrieval import RetrievalResult
    from kairox.workspace.rag_index import IndexStats

__all__ = ["Kairox", "KairoxApiError", "MemoryProposal", "open"]

ProposalStatus = Literal["accepted", "pending", "rejected"]


class KairoxApiError(KairoxError, RuntimeError):
    """The API was called in a way that cannot work; the message says what to call instead."""


@dataclass(frozen=True)
class MemoryProposal:
    """What became of one proposed memory.

    ``accepted``: a session memory, kept at once. ``pending``: a user or workspace memory
    waiting for the user (``kairox memory approve ID``). ``rejected``: not valid; ``reason``
    says why.
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
    from kairox.facade import AppFacade

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


def _outside_event_loop(name: str, twin: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise KairoxApiError(
        f"{name}() was called inside a running event loop; use `await kx.{twin}(...)`"
    )


class Kairox:
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

    def __repr__(self) -> str:
        return f"Kairox({str(self.facade.workspace_root)!r}, profile={self.profile!r})"

    def __enter__(self) -> Kairox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        :class:`~kairox.facade.SearchOptions` (``k``, ``filters``, ``profile``, ``fusion``,
        ``only``, ...); the profile is this handle's unless given. Inside a running event
        loop, use :meth:`asearch`.
        """
        _outside_event_loop("search", "asearch")
        return self.facade.search_sync(query, **self._search_options(options))

    async def asearch(self, query: str, **options: Unpack[SearchOptions]) -> RetrievalResult:
        """:meth:`search` for ``async`` callers."""
        return await self.facade.search(query, **self._search_options(options))

    def _search_options(self, options: SearchOptions) -> SearchOptions:
        return {**options, "profile": options.get("profile") or self.profile}

    # -- context ----------------------------------------------------------------------

    def context(
        self, prompt: str, *, session: str | None = None, profile: str | None = None
    ) -> Assembly:
        """The prompt a turn with ``prompt`` would send, inside the profile's budget.

        ``assembly.messages`` are :class:`~kairox.models.ChatMessage` objects;
        ``assembly.openai_messages()`` gives them as OpenAI chat dicts; ``assembly.trace()``
        the per-source token accounting. Nothing is recorded. Inside a running event loop,
        use :meth:`acontext`.
        """
        _outside_event_loop("context", "acontext")
        return asyncio.run(self.acontext(prompt, session=session, profile=profile))

    async def acontext(
        self, prompt: str, *, session: str | None = None, profile: str | None = None
    ) -> Assembly:
        """:meth:`context` for ``async`` callers."""
        from kairox.session import open_session

        async with open_session(
            self.facade, session or self.session, profile=profile or self.profile
        ) as live:
            return await live.assemble(prompt)

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
        return MemoryProposal("rejected", reason=outcome.rejected[0][1])
