"""bm25s as ``kairox bench scale`` runs it: indexed in a child process, saved, and loaded
from its saved index for the searches (as an application using bm25s would).

``python -m kairox.bench.scale_peer CORPUS.jsonl FOLDER`` indexes a ``kairox kb ingest``
JSONL corpus (title and text, the peers' shared analysis of
:func:`kairox.bench.peers.peer_analyzer`) and saves it in FOLDER.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kairox.bench import BENCH_EXTRA, BenchError
from kairox.bench.peers import peer_analyzer


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise BenchError(f"the scale benchmark compares with bm25s: {BENCH_EXTRA}") from None
    return bm25s


def build_index(corpus: Path, folder: Path) -> int:
    """Index ``corpus`` with bm25s and save it in ``folder``; returns the passages."""
    bm25s = _bm25s()
    analyse, _ = peer_analyzer()
    tokens = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            tokens.append(analyse(f"{record.get('title', '')}\n{record['text']}"))
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    index.save(str(folder), show_progress=False)
    return len(tokens)


class SavedBm25s:
    """A saved bm25s index, loaded (memory-mapped) and searched with the same analysis."""

    def __init__(self, folder: Path) -> None:
        self.index = _bm25s().BM25.load(str(folder), mmap=True, show_progress=False)
        self.vocabulary = self.index.vocab_dict
        self.analyse, _ = peer_analyzer()

    def search(self, text: str, k: int) -> list[int]:
        """The rows of the ``k`` best passages (those with a score)."""
        tokens = [t for t in self.analyse(text) if t in self.vocabulary]
        if not tokens:
            return []
        rows, scores = self.index.retrieve([tokens], k=k, show_progress=False, n_threads=1)
        return [int(r) for r, s in zip(rows[0], scores[0], strict=True) if s > 0]


def main(argv: Sequence[str] | None = None) -> None:
    corpus, folder = (Path(a) for a in (argv if argv is not None else sys.argv[1:]))
    print(build_index(corpus, folder))


if __name__ == "__main__":
    main()
