"""Reading a dataset in BEIR layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from kairox.support.errors import KairoxError


class DatasetError(KairoxError, ValueError):
    """The folder is not a usable BEIR dataset; the message says what is missing."""


@dataclass(frozen=True)
class BeirDataset:
    """A loaded dataset: documents, the queries of one split, and their judgements."""

    path: Path
    split: str
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]  # id -> text, only queries judged in this split
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> relevance
    corpus_sha256: str


def load_beir(path: Path, split: str = "test") -> BeirDataset:
    """Load ``path``; only queries with judgements in ``qrels/<split>.tsv`` are kept."""
    corpus_file = path / "corpus.jsonl"
    queries_file = path / "queries.jsonl"
    qrels_file = path / "qrels" / f"{split}.tsv"
    for needed in (corpus_file, queries_file, qrels_file):
        if not needed.is_file():
            splits = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
            hint = f" (splits here: {', '.join(splits)})" if splits else ""
            raise DatasetError(
                f"{path} is not a BEIR dataset: {needed.relative_to(path)} is missing{hint}"
            )
    digest = hashlib.sha256()
    corpus: dict[str, tuple[str, str]] = {}
    with corpus_file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            digest.update(raw)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                corpus[str(record["_id"])] = (record.get("title") or "", record["text"])
            except (json.JSONDecodeError, KeyError) as exc:
                raise DatasetError(
                    f"{corpus_file}:{number}: expected JSON with '_id' and 'text' ({exc})"
                ) from exc
    qrels: dict[str, dict[str, int]] = {}
    with qrels_file.open(newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for number, row in enumerate(reader, start=1):
            if number == 1 and row and not row[-1].lstrip("-").isdigit():
                continue  # header
            if len(row) < 3:
                raise DatasetError(f"{qrels_file}:{number}: expected query-id, corpus-id, score")
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with queries_file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                if str(record["_id"]) in qrels:
                    queries[str(record["_id"])] = record["text"]
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise DatasetError(
            f"{qrels_file}: judged queries missing from queries.jsonl: {missing[:5]}"
        )
    return BeirDataset(path, split, corpus, queries, qrels, digest.hexdigest())
