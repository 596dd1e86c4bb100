"""Showing an :class:`~kairox.support.embed_progress.EmbedProgress` on stderr.

On a terminal: a transient rich line (bar over the planned chunks and sentences, counts,
rate, ETA). Elsewhere (piped, CI logs): a plain line every few seconds, and one at the end.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from kairox.cli.app import PLAIN_PROGRESS_EVERY_S, console_err
from kairox.support.embed_progress import EmbedProgress


@contextlib.contextmanager
def embed_progress(
    label: str, *, disabled: bool = False, every_s: float = PLAIN_PROGRESS_EVERY_S
) -> Iterator[EmbedProgress]:
    """Yields the :class:`EmbedProgress` to report into; shows it while the block runs."""
    if disabled:
        yield EmbedProgress()
    elif console_err.is_terminal:
        with _rich(label) as progress:
            yield progress
    else:
        with _plain(label, every_s) as progress:
            yield progress


@contextlib.contextmanager
def _rich(label: str) -> Iterator[EmbedProgress]:
    from rich.progress import BarColumn, Progress, TextColumn

    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[line]}"),
        console=console_err,
        transient=True,
    )
    task = bars.add_task(label, total=None, line="")
    lock = threading.Lock()

    def show(state: EmbedProgress) -> None:
        done, planned = state.measure()
        with lock:
            bars.update(task, completed=done, total=planned or None, line=state.summary())

    with bars:
        yield EmbedProgress(listener=show)


@contextlib.contextmanager
def _plain(label: str, every_s: float) -> Iterator[EmbedProgress]:
    progress = EmbedProgress()
    stop = threading.Event()

    def tick() -> None:
        # A line every few seconds whether or not a batch finished: a long batch must
        # not look like a hang.
        while not stop.wait(every_s):
            console_err.print(f"{label}: {progress.summary()}", markup=False, highlight=False)

    ticker = threading.Thread(target=tick, name="kairox-progress", daemon=True)
    ticker.start()
    try:
        yield progress
    finally:
        stop.set()
        ticker.join()
    if progress.embedded or progress.documents:
        console_err.print(f"{label}: {progress.summary()}", markup=False, highlight=False)
