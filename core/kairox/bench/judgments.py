"""Your own questions and judgments: ``--queries`` and ``--qrels`` files, and how a judged
id is matched against the hits a source returns.

Queries: JSONL, one ``{"id": ..., "text": ...}`` per line (``_id`` is accepted too, so a
BEIR ``queries.jsonl`` works), or TSV ``id<TAB>text`` (a header row ``id text`` or
``query-id text`` is skipped). Qrels: TREC (``qid 0 docid relevance``, whitespace
separated) or BEIR TSV (``query-id<TAB>corpus-id<TAB>score`` with its header); grades
are integers, 0 means judged not relevant.

A judged id names a passage the way the sources name it. A hit matches a judged id
when the id equals any of, in this order:

1. ``metadata["document_id"]`` (or ``doc_id``): the document a chunk came from, so a
   judgment naming a document counts any of its chunks;
2. the hit's ``id`` (the document id given at ``kairox kb ingest``; ``path#chunk`` for a
   workspace chunk);
3. the hit's ``uri``;
4. ``metadata["path"]`` (a workspace chunk's file, or a file ingested into a knowledge
   base): every chunk of the file counts;
5. ``path:LINE`` for a workspace chunk whose text spans that line of the file (1-based).

The ranking scored is the hits' matched ids, best first, each kept once (the first,
best-ranked chunk of a document stands for it); a hit matching no judged id keeps its
document id (``document_id``, ``doc_id`` or ``path`` metadata, else its id), so it still
takes one rank, however many of its chunks were found.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox.bench import BenchError
from kairox.bench.beir import BeirDataset, DatasetError

_LINE_REF = re.compile(r"^(?P<path>.+):(?P<line>\d+)$")


def load_queries(path: Path) -> dict[str, str]:
    """Query id -> text from a JSONL or TSV file (see the module docs)."""
    text = path.read_text(encoding="utf-8")
    queries: dict[str, str] = {}
    first = next((line for line in text.splitlines() if line.strip()), "")
    as_json = first.lstrip().startswith("{")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if as_json:
            try:
                record = json.loads(line)
                qid = record.get("id", record.get("_id"))
                body = record["text"]
            except (json.JSONDecodeError, KeyError, AttributeError) as exc:
                raise DatasetError(
                    f'{path}:{number}: expected JSON like {{"id": "q1", "text": "..."}} ({exc})'
                ) from None
            if qid is None:
                raise DatasetError(f'{path}:{number}: the query has no "id"')
        else:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                raise DatasetError(
                    f"{path}:{number}: expected 'id<TAB>text' (or JSONL with id and text)"
                )
            qid, body = parts[0], "\t".join(parts[1:])
            if number == 1 and qid.strip().lower() in ("id", "query-id", "qid", "_id"):
                continue
        queries[str(qid).strip()] = str(body)
    if not queries:
        raise DatasetError(f"{path}: no queries in the file")
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id -> judged id -> grade, from TREC qrels or BEIR TSV (see the module docs)."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            tsv = "\t" in line
            row = next(csv.reader([line], delimiter="\t")) if tsv else line.split()
            row = [cell.strip() for cell in row]
            if number == 1 and not row[-1].lstrip("-").isdigit():
                continue  # a header
            if len(row) == 4:  # TREC: qid iteration docid relevance
                qid, doc_id, grade = row[0], row[2], row[3]
            elif len(row) == 3:  # BEIR: query-id corpus-id score
                qid, doc_id, grade = row
            else:
                raise DatasetError(
                    f"{path}:{number}: expected TREC 'qid 0 docid relevance' or BEIR "
                    f"'query-id<TAB>corpus-id<TAB>score', got {len(row)} fields"
                )
            try:
                qrels.setdefault(qid, {})[doc_id] = int(grade)
            except ValueError:
                raise DatasetError(
                    f"{path}:{number}: the relevance {grade!r} is not an integer"
                ) from None
    if not qrels:
        raise DatasetError(f"{path}: no judgments in the file")
    return qrels


def custom_dataset(
    queries_file: Path,
    qrels_file: Path,
    *,
    corpus: BeirDataset | None = None,
) -> BeirDataset:
    """Your queries and qrels as a dataset (with ``corpus``'s documents, if given).

    Only judged queries are kept; a judged query without text is an error.
    """
    queries = load_queries(queries_file)
    qrels = load_qrels(qrels_file)
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise DatasetError(
            f"{qrels_file}: {len(missing)} judged queries are not in {queries_file}: "
            f"{', '.join(missing[:5])}"
        )
    digest = hashlib.sha256(queries_file.read_bytes() + qrels_file.read_bytes()).hexdigest()
    return BeirDataset(
        path=corpus.path if corpus is not None else queries_file.parent,
        split=corpus.split if corpus is not None else qrels_file.stem,
        corpus=corpus.corpus if corpus is not None else {},
        queries={qid: queries[qid] for qid in qrels},
        qrels=qrels,
        corpus_sha256=corpus.corpus_sha256 if corpus is not None else digest,
    )


class IdMatcher:
    """Maps a hit to the judged id it stands for (see the module docs)."""

    def __init__(self, judged: Iterable[str], root: Path | None = None) -> None:
        self.judged = set(judged)
        self.root = root
        self._lines: dict[str, set[int]] = {}
        for ref in self.judged:
            match = _LINE_REF.match(ref)
            if match:
                self._lines.setdefault(match["path"], set()).add(int(match["line"]))
        self._line_starts: dict[str, list[int] | None] = {}

    def candidates(self, hit: Any) -> list[str]:
        metadata: Mapping[str, Any] = getattr(hit, "metadata", None) or {}
        found = [metadata.get("document_id"), metadata.get("doc_id"), hit.id, hit.uri]
        found.append(metadata.get("path"))
        return [str(c) for c in found if c not in (None, "")]

    def key(self, hit: Any) -> str:
        """The judged id ``hit`` matches, else its document id."""
        candidates = self.candidates(hit)
        for candidate in candidates:
            if candidate in self.judged:
                return candidate
        line = self._line_key(hit)
        if line is not None:
            return line
        return document_id(hit)

    def ranking(self, hits: Sequence[Any]) -> list[str]:
        """Matched ids best first, each once."""
        return list(dict.fromkeys(self.key(hit) for hit in hits))

    def _line_key(self, hit: Any) -> str | None:
        metadata = getattr(hit, "metadata", None) or {}
        path = metadata.get("path")
        if not self._lines or path not in self._lines:
            return None
        start, end = metadata.get("start"), metadata.get("end")
        if not isinstance(start, int) or not isinstance(end, int):
            return None
        starts = self._starts(str(path), hit.uri)
        if starts is None:
            return None
        for line in sorted(self._lines[path]):
            # The chunk [start, end) spans the line when the two ranges overlap.
            if 0 < line <= len(starts) and starts[line - 1] < end and _next(starts, line) > start:
                return f"{path}:{line}"
        return None

    def _starts(self, path: str, uri: str | None) -> list[int] | None:
        """Character offset of each line's start in the file, read once."""
        if path not in self._line_starts:
            file = Path(uri) if uri else (self.root / path if self.root else None)
            try:
                text = file.read_text(encoding="utf-8", errors="replace") if file else None
            except OSError:
                text = None
            if text is None:
                self._line_starts[path] = None
            else:
                starts = [0] + [m.end() for m in re.finditer("\n", text)]
                self._line_starts[path] = starts
        return self._line_starts[path]


def document_id(hit: Any) -> str:
    """The document a hit (perhaps one chunk of it) belongs to."""
    metadata = getattr(hit, "metadata", None) or {}
    found = metadata.get("document_id") or metadata.get("doc_id") or metadata.get("path")
    return str(found or hit.id)


def _next(starts: list[int], line: int) -> int:
    return starts[line] if line < len(starts) else 1 << 62


def judged_ids(dataset: BeirDataset) -> set[str]:
    """Every id judged relevant (grade > 0) in ``dataset``."""
    return {doc for judged in dataset.qrels.values() for doc, grade in judged.items() if grade > 0}


def check_known(where: str, judged: set[str], known: Iterable[str]) -> None:
    """Stop when no judged document exists in ``where`` (ids or their documents)."""
    stored = set(known)
    if not judged or not stored:
        return
    documents = stored | {key.split("#", 1)[0] for key in stored}
    present = len(judged & documents)
    if present == 0:
        raise BenchError(
            f"0 of {len(judged)} judged documents exist in {where}: do the ids match? ids "
            f"look like {_sample(stored)} there and {_sample(judged)} in the qrels "
            "(judged ids are matched against document ids, uri or path; see "
            "docs/benchmarking.md)"
        )


def check_returned(system: str, judged: set[str], run: Mapping[str, Sequence[str]]) -> None:
    """Stop when a system returned hits but none of them is a judged document."""
    returned = {doc for ranked in run.values() for doc in ranked}
    if returned and judged and not returned & judged:
        raise BenchError(
            f"0 of {len(judged)} judged documents were returned by {system!r} for any "
            f"query: do the ids match? ids look like {_sample(returned)} there and "
            f"{_sample(judged)} in the qrels (judged ids are matched against document "
            "ids, uri or path; see docs/benchmarking.md)"
        )


def _sample(ids: Iterable[str], n: int = 3) -> str:
    return ", ".join(repr(i) for i in sorted(ids)[:n])
