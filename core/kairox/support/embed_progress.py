"""Counting embedding work as it happens, for honest progress (rate and ETA).

An :class:`EmbedProgress` holds what a run plans to embed and what it has embedded so far:
chunks and sentences (the workspace index reports them), other texts, and documents
written (``kairox kb ingest``, whose built-in stores embed nothing at ingest). Each change
calls the listener; rate and ETA come from the counts and the clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class EmbedProgress:
    """What a run has embedded against what it plans; thread-safe.

    :param listener: called with this object after every change.
    :param unit: what ``documents`` counts, in the summary (``kb ingest`` writes chunks).
    :param verb: what was done to ``documents`` when nothing was embedded ("written",
        "pushed" for ``kb sync``).
    """

    listener: Callable[[EmbedProgress], None] | None = None
    unit: str = "documents"
    verb: str = "written"
    chunks_planned: int = 0
    sentences_planned: int = 0
    documents_planned: int = 0
    chunks: int = 0
    sentences: int = 0
    texts: int = 0
    documents: int = 0
    #: What the run does before any embedding ("reading files 12/85", "loading the
    #: model..."); shown until the first batch is counted.
    stage: str = ""
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def plan(self, *, chunks: int = 0, sentences: int = 0, documents: int = 0) -> None:
        """Add work that is now known to be coming."""
        with self._lock:
            self.chunks_planned += chunks
            self.sentences_planned += sentences
            self.documents_planned += documents
        self._notify()

    def advance(
        self, *, chunks: int = 0, sentences: int = 0, texts: int = 0, documents: int = 0
    ) -> None:
        """Count work done."""
        with self._lock:
            self.chunks += chunks
            self.sentences += sentences
            self.texts += texts
            self.documents += documents
        self._notify()

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self._notify()

    def _notify(self) -> None:
        if self.listener is not None:
            self.listener(self)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def embedded(self) -> int:
        """Vectors made so far (chunks, sentences and counted texts)."""
        return self.chunks + self.sentences + self.texts

    @property
    def rate(self) -> float:
        """Vectors (or, when none are made, documents) a second since the start."""
        elapsed = self.elapsed
        done = self.embedded or self.documents
        return done / elapsed if elapsed > 0 else 0.0

    def measure(self) -> tuple[int, int]:
        """(done, planned) of what the bar and the ETA follow: the documents while some
        planned are still to do (a streaming run plans its files first and their chunks
        only as it reads them), else the chunks and sentences, else the documents."""
        if self.documents < self.documents_planned:
            return self.documents, self.documents_planned
        planned = self.chunks_planned + self.sentences_planned
        if planned:
            return self.chunks + self.sentences, planned
        return self.documents, self.documents_planned

    @property
    def eta(self) -> float | None:
        """Seconds left, from :meth:`measure`; ``None`` while nothing is planned or
        nothing is done yet."""
        done, planned = self.measure()
        if not planned or not done:
            return None
        return max(0.0, (planned - done) * self.elapsed / done)

    def summary(self) -> str:
        """One line: counts, rate, ETA (what a non-terminal gets every few seconds)."""
        parts = []
        if self.chunks_planned or self.chunks:
            parts.append(f"{self.chunks}/{self.chunks_planned} chunks")
        if self.sentences_planned or self.sentences:
            parts.append(f"{self.sentences}/{self.sentences_planned} sentences")
        if self.documents_planned or self.documents:
            parts.append(f"{self.documents}/{self.documents_planned} {self.unit}")
        if self.texts:
            parts.append(f"{self.texts} texts")
        if self.stage and not self.embedded and not self.documents:
            # Work before the first batch (reading files, loading the model): said as
            # such, not as a rate of 0.0/s that looks like a hang.
            return " · ".join([self.stage, *parts, f"{_clock(self.elapsed)} elapsed"])
        verb = "embedded" if self.embedded or not self.documents else self.verb
        line = (", ".join(parts) or "nothing to embed yet") + f" {verb} · {self.rate:.1f}/s"
        eta = self.eta
        if eta is not None:
            line += f" · ETA {_clock(eta)}"
        return line + f" · {_clock(self.elapsed)} elapsed"


def _clock(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
