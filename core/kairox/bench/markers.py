"""``kairox bench markers``: memory-marker extractor throughput by chunk size.

A stream of prose, code fences, inline code and valid and malformed ``<memory>`` markers
is fed to :class:`~kairox.memory.MarkerExtractor` in chunks of a fixed size (1 byte,
64 bytes, 4 KiB by default), as a model's token stream would arrive. The baseline is the
cheapest possible "strip the markers": one ``re.sub`` pass over the whole text, which can
neither stream nor tell code from prose. The extractor's cost is quoted as a ratio to it.
Each figure is the median of ``repeats`` runs.

The helpers every benchmark shares (the machine, percentiles, writing the report) are
:mod:`kairox.bench.report`'s.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from kairox.bench.report import created_now, machine
from kairox.memory import MarkerExtractor

__all__ = [
    "BASELINE",
    "DEFAULT_CHUNKS",
    "PIECES",
    "benchmark",
    "extract",
    "make_stream",
    "median_seconds",
]

#: Chunk sizes measured by default: a byte at a time, a token-ish chunk, a page.
DEFAULT_CHUNKS = (1, 64, 4096)

#: The stream is these pieces repeated: prose, inline code, markup, valid markers in both
#: quote styles, a marker inside a code fence (literal, must stay visible), a rejected
#: marker (unknown scope), and multi-byte characters.
PIECES = (
    "The build passed after we pinned the parser version. ",
    "Next we look at the flaky test in `tests/test_io.py` and the <b>odd</b> markup.\n",
    '<memory scope="workspace" key="ci.python">CI runs Python 3.11 only.</memory>',
    '```python\nprint(\'<memory scope="user" key="x">literal in code</memory>\')\n```\n',
    "<memory scope='user' key='tone'>Prefers short answers.</memory> ",
    '<memory scope="global">rejected: unknown scope</memory>',
    "Some unicode: café, 東京, 🚀 and a stray < sign.\n",
)

#: The baseline: strip every marker in one pass (no streaming, no code awareness).
BASELINE = re.compile(r"<memory\b[^>]*>.*?</memory>", re.IGNORECASE | re.DOTALL)


def make_stream(size: int) -> str:
    """:data:`PIECES` repeated and cut to ``size`` bytes of UTF-8 (less a partial character)."""
    unit = "".join(PIECES)
    text = (unit * (size // len(unit) + 1))[:size]
    return text.encode("utf-8")[:size].decode("utf-8", "ignore")


def extract(text: str, chunk: int) -> int:
    """Feed ``text`` to a fresh extractor ``chunk`` characters at a time; visible length."""
    extractor = MarkerExtractor()
    visible = 0
    for start in range(0, len(text), chunk):
        visible += len(extractor.feed(text[start : start + chunk]))
    visible += len(extractor.close())
    return visible


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``run``."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def benchmark(
    *,
    megabytes: float = 10.0,
    chunks: Sequence[int] = DEFAULT_CHUNKS,
    repeats: int = 3,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Measure the extractor at each chunk size against one ``re.sub`` pass.

    Returns the report ``kairox bench markers --out`` writes: ``stream_bytes``,
    ``re_sub_seconds`` and one row per chunk size with ``seconds``, ``mb_per_s`` and
    ``ratio_to_re_sub``.
    """
    if megabytes <= 0:
        raise ValueError(f"megabytes must be > 0, got {megabytes}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if not chunks or any(chunk < 1 for chunk in chunks):
        raise ValueError(f"chunk sizes must be >= 1, got {list(chunks)}")
    text = make_stream(int(megabytes * 1_000_000))
    # Chunks are cut in characters, as a decoded token stream arrives; the stream is
    # 99 % ASCII, so a chunk of 64 characters is 64 bytes almost everywhere.
    stream_bytes = len(text.encode("utf-8"))
    visible_expected = len(BASELINE.sub("", text))
    baseline = median_seconds(lambda: BASELINE.sub("", text), repeats)
    rows = []
    for done, chunk in enumerate(chunks):
        if progress is not None:
            progress("extracting", done, len(chunks))
        visible: list[int] = []
        seconds = median_seconds(
            lambda c=chunk, seen=visible: seen.append(extract(text, c)), repeats
        )
        rows.append(
            {
                "chunk_bytes": chunk,
                "seconds": round(seconds, 3),
                "mb_per_s": round(stream_bytes / seconds / 1e6, 2),
                "ratio_to_re_sub": round(seconds / baseline, 1),
                "visible_chars": visible[0],
            }
        )
    if progress is not None:
        progress("extracting", len(chunks), len(chunks))
    return {
        "benchmark": "markers_throughput",
        "stream_chars": len(text),
        "stream_bytes": stream_bytes,
        "repeats": repeats,
        "re_sub_seconds": round(baseline, 4),
        # re.sub also strips the marker inside the code fence, so it shows less text.
        "re_sub_visible_chars": visible_expected,
        "chunks": rows,
        "created": created_now(),
        "machine": machine(),
    }
