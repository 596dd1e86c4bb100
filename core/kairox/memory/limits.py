"""The bounds on memory proposals: body size, rate per proposing session, pending queue.

One client of the MCP server once queued 3,300 pending proposals in 19 seconds, and a real
one hides among so many. :class:`ProposalLimits` holds the ``[memory]`` bounds;
:class:`ProposalRate` counts the proposals each session makes from outside a chat turn (the
MCP server, the Python API), in all and in the last minute. The body bound applies on every
path and the pending bound to every origin; :class:`~kairox.memory.approvals.MemoryApprovals`
applies them.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kairox.memory.proposals import MAX_PROPOSAL_CHARS

__all__ = ["DEFAULT_LIMITS", "ProposalLimits", "ProposalRate"]

_MINUTE: Final = 60.0


@dataclass(frozen=True)
class ProposalLimits:
    """The ``[memory]`` bounds on proposals (``0`` allows none).

    :param max_body_chars: the longest memory body on every path (markers, MCP, the Python
        API, ``kairox memory set``/``edit``, the web page).
    :param max_per_session: proposals one session may make from outside a chat turn.
    :param max_per_minute: of those, how many in any 60 seconds.
    :param max_pending_per_origin: proposals from one origin (``chat``, ``mcp``, ``api``)
        that may wait for a person at once; more wait only once some are decided.
    """

    max_body_chars: int = MAX_PROPOSAL_CHARS
    max_per_session: int = 100
    max_per_minute: int = 20
    max_pending_per_origin: int = 20


DEFAULT_LIMITS: Final = ProposalLimits()


class ProposalRate:
    """How many proposals each session has made in this process, in all and lately.

    :param clock: seconds on a monotonic clock (injectable so tests drive time).
    """

    def __init__(
        self, limits: ProposalLimits, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._total: dict[str, int] = {}
        self._recent: dict[str, deque[float]] = {}

    def admit(self, session_id: str) -> str | None:
        """Count one proposal from ``session_id``; the reason it is refused, or ``None``.

        A refused proposal is not counted, so a client that waits gets through again.
        """
        limits = self.limits
        with self._lock:
            now = self._clock()
            recent = self._recent.setdefault(session_id, deque())
            while recent and recent[0] <= now - _MINUTE:
                recent.popleft()
            made = self._total.get(session_id, 0)
            if made >= limits.max_per_session:
                return (
                    f"this session already made {made} memory proposals, the most one session "
                    f"may ([memory] max_proposals_per_session = {limits.max_per_session}); "
                    "propose only what the user asked to keep"
                )
            if len(recent) >= limits.max_per_minute:
                wait = max(1, round(recent[0] + _MINUTE - now))
                return (
                    f"{len(recent)} memory proposals in the last minute, the most allowed "
                    f"([memory] max_proposals_per_minute = {limits.max_per_minute}); "
                    f"try again in {wait} s"
                )
            recent.append(now)
            self._total[session_id] = made + 1
        return None
