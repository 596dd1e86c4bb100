"""Synthetic corpora of any size built from a BEIR corpus, for ``kairox bench scale``.

A corpus of N passages repeats the source's passages until N are written. The first
round is the source as it is; in round ``r`` every passage is perturbed so that no two
passages of the result are alike and its term statistics stay those of real text: one
word (chosen by ``r``) is left out and the round's number is put in its place, and the
title gets the same number. Ids are ``<source id>-r<r>``. Written as ``kairox kb ingest``
JSONL (``id``, ``title``, ``text``), streamed: memory holds the source, not the result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from kairox.bench.beir import DatasetError


def source_passages(source: Path) -> list[tuple[str, str, str]]:
    """``(id, title, text)`` of a BEIR ``corpus.jsonl`` (or of the folder holding one)."""
    corpus = source / "corpus.jsonl" if source.is_dir() else source
    if not corpus.is_file():
        raise DatasetError(f"{source}: no corpus.jsonl here; give a BEIR folder or its corpus")
    passages = []
    with corpus.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                passages.append((str(record["_id"]), record.get("title") or "", record["text"]))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise DatasetError(
                    f"{corpus}:{number}: expected JSON with '_id' and 'text' ({exc})"
                ) from exc
    if not passages:
        raise DatasetError(f"{corpus} holds no passages")
    return passages


def perturbed(text: str, round_: int) -> str:
    """``text`` with one word (chosen by ``round_``) replaced by the round's number;
    round 0 is the text itself."""
    if round_ == 0:
        return text
    words = text.split()
    if not words:
        return str(round_)
    words[(round_ * 31) % len(words)] = str(round_)
    return " ".join(words)


def passages(source: list[tuple[str, str, str]], size: int) -> Iterator[dict[str, str]]:
    """The ``size`` records of the synthetic corpus, in order."""
    for number in range(size):
        round_, position = divmod(number, len(source))
        doc_id, title, text = source[position]
        yield {
            "id": f"{doc_id}-r{round_}",
            "title": f"{title} {round_}" if round_ and title else title,
            "text": perturbed(text, round_),
        }


def write_corpus(source: list[tuple[str, str, str]], size: int, out: Path) -> int:
    """Write the corpus of ``size`` passages to ``out`` (JSONL); returns its bytes of text."""
    text_bytes = 0
    with out.open("w", encoding="utf-8") as handle:
        for record in passages(source, size):
            text_bytes += len(record["title"].encode()) + len(record["text"].encode())
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return text_bytes
