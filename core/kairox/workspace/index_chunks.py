"""Cutting a file the workspace index has read into the chunks and sentences it stores.

Mixed into :class:`~kairox.workspace.rag_index.WorkspaceRagIndex` (whose settings it
uses): source and text files are cut by :mod:`~kairox.workspace.code_chunks` (syntax
chunks when the file's grammar loads), converted documents at their pages and headings
(:mod:`~kairox.workspace.convert.sections`); every chunk of several sentences is split
into sentences for their vectors.
"""

from __future__ import annotations

import json
from typing import Any

from kairox.workspace.chunking import split_sentences
from kairox.workspace.code_chunks import chunk_source
from kairox.workspace.convert.base import Converted
from kairox.workspace.convert.sections import DocumentChunk, chunk_converted
from kairox.workspace.files import WorkspaceFile
from kairox.workspace.index_types import _Chunk, _PendingFile, _Sentence, _text_hash, embed_text
from kairox.workspace.line_chunks import SourceChunk
from kairox.workspace.line_store import chunker_for


class ChunkingMixin:
    """Files cut into the index's chunks, mixed into
    :class:`~kairox.workspace.rag_index.WorkspaceRagIndex`."""

    def _chunker(self, relpath: str) -> str:
        chunker = chunker_for(relpath, self.syntax_chunks)
        spec = self.converters.claiming(relpath) if chunker == "lines" else None
        # Bumped when converted documents are cut differently (1: by page and heading).
        return f"converted:{spec.name}:1" if spec is not None else chunker

    def _prepare(
        self, file: WorkspaceFile, converted: Converted, content_hash: str
    ) -> _PendingFile:
        chunker = self._chunker(file.relpath)
        if not converted.source_lines:
            chunks = self._document_chunks(converted)
            return _PendingFile(
                file.relpath, content_hash, file.size, file.mtime_ns, chunks, chunker
            )
        chunks = []
        for c in chunk_source(
            converted.text,
            path=file.relpath,
            max_tokens=self.chunk_tokens,
            overlap_tokens=self.chunk_overlap,
            encoding=self.encoding,
            syntax=chunker != "lines",
        ):
            chunks.append(
                self._chunk(
                    c,
                    c.context,
                    line_start=c.line_start,
                    line_end=c.line_end,
                    symbol=c.symbol,
                    language=c.language,
                )
            )
        return _PendingFile(file.relpath, content_hash, file.size, file.mtime_ns, chunks, chunker)

    def _document_chunks(self, converted: Converted) -> list[_Chunk]:
        """A PDF's (HTML page's, notebook's...) chunks cut at its pages and headings, each
        labelled with them; its lines are 0, the extracted text's lines being no place in
        the file. The heading path is the chunk's search context."""
        chunks = []
        for c in chunk_converted(
            converted,
            max_tokens=self.chunk_tokens,
            overlap_tokens=self.chunk_overlap,
            encoding=self.encoding,
        ):
            labels = {k: v for k, v in c.metadata.items() if k not in {"line_start", "line_end"}}
            chunks.append(
                self._chunk(
                    c,
                    str(labels.get("heading", "")),
                    labels=json.dumps(labels, sort_keys=True) if labels else "",
                )
            )
        return chunks

    def _chunk(self, c: SourceChunk | DocumentChunk, context: str, **where: Any) -> _Chunk:
        """The stored form of chunk ``c``, searched with ``context``; ``where`` are its
        place fields (lines, symbol, labels)."""
        # The vector (addressed by this hash) is of the context and the text together.
        text_hash = _text_hash(embed_text(context, c.text))
        sentences = self._sentences(c.text, text_hash)
        return _Chunk(
            c.index,
            c.start,
            c.end,
            c.token_count,
            text_hash,
            c.text,
            sentences,
            context=context,
            **where,
        )

    def _sentences(self, chunk: str, chunk_hash: str) -> tuple[_Sentence, ...]:
        if self.sentence_weight == 0 or not self.vectors:
            return ()
        found = split_sentences(chunk, encoding=self.encoding)
        if len(found) == 1:
            # The chunk is one sentence: its own vector serves (nothing more to embed).
            only = found[0]
            return (_Sentence(0, only.start, only.end, chunk_hash, chunk),)
        return tuple(_Sentence(s.index, s.start, s.end, _text_hash(s.text), s.text) for s in found)
