"""Syntax-aware chunks: source code cut at function, class and method boundaries.

:func:`chunk_source` is the one entry point for any text, code or not: given the text
and its path (or language), it parses it with the language's tree-sitter grammar
(:mod:`kairox.workspace.grammars`) when one is installed and packs whole lines into
:class:`~kairox.workspace.line_chunks.SourceChunk` windows otherwise.

With a grammar, every definition (function, method, class that holds none, impl...) is
a chunk of its own, with its decorators and the comments right above it; the statements
between definitions (imports, constants, a class's header and attributes) are packed
into chunks of up to ``max_tokens``. A definition too large for one chunk is opened and
its children are chunked the same way (a long function is cut between statements, its
signature kept with the first piece), so the cuts fall at the innermost boundaries that
make the pieces fit; a single node still too large (a huge literal) falls back to line
windows. ``merge=True`` packs neighbouring definitions of one parent up to
``max_tokens`` instead (fewer, larger chunks).

Each chunk names the symbol it holds, ``module.Class.method`` with the module taken from
the path, and carries a search ``context``: that symbol path (with ``CamelCase`` names
also spelt as words, which FTS5's tokenizer cannot split) and the header lines of the
definitions around it that it does not hold itself (``class Console:`` for a method, a
function's signature for a piece of its body). The workspace index gives the context to
FTS and to the embedder with the text, so a method is found by its class's name.
Chunks always start and end at line boundaries and never overlap; every non-blank line
is in one.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kairox.context.tokens import DEFAULT_ENCODING
from kairox.workspace.grammars import Grammar, grammar_for, language_of, load_parser
from kairox.workspace.line_chunks import LineTable, SourceChunk, line_windows

__all__ = ["SourceChunk", "chunk_source", "module_path"]

# Node types of comments in the supported grammars; a comment directly above a
# definition (a Go doc comment, a Rust /// line) is chunked with it.
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
# Nodes that belong to the definition after them (Python decorators, Java annotations).
_ATTACHED = frozenset({"decorator", "attribute_item", "marker_annotation", "annotation"})
# Values that make a JavaScript `const f = ...` a definition.
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "class", "generator_function"}
)
# A definition's header (decorators and signature) in its context: at most this many lines.
_HEADER_LINES = 4
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Leading folders that are layout, not part of a module's name.
_LAYOUT_DIRS = frozenset({"src"})


@dataclass
class _Segment:
    """A run of whole lines (0-based, inclusive) that one node covers.

    ``headers`` are the line spans of the headers of the definitions around it (outermost
    first); ``sticky`` segments (decorators, an opened definition's signature) travel
    with the segment after them.
    """

    first: int
    last: int
    path: tuple[str, ...]
    is_def: bool
    kind: str
    headers: tuple[tuple[int, int], ...] = ()
    sticky: bool = False


def module_path(path: str | None) -> str:
    """The dotted module a file's path names: ``src/pkg/mod.py`` -> ``pkg.mod``."""
    if not path:
        return ""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] in {"__init__", "index", "mod"} and len(parts) > 1:
        parts.pop()  # a package's own file speaks for the package
    layout = [i for i, part in enumerate(parts[:-1]) if part in _LAYOUT_DIRS]
    if layout:
        parts = parts[layout[-1] + 1 :]  # src/pkg/mod.py imports as pkg.mod
    return ".".join(p for p in parts if p not in {"", "."})


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace")


def _node_name(node: Any, grammar: Grammar) -> str | None:
    """The name a definition node declares, or None when it declares none."""
    if node.type == "lexical_declaration":
        for child in node.named_children:
            value = child.child_by_field_name("value")
            if value is not None and value.type in _FUNCTION_VALUES:
                name = child.child_by_field_name("name")
                return _text(name) if name is not None else None
        return None
    name = node.child_by_field_name("name")
    if name is not None:
        return _text(name)
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            if declarator.type.endswith("identifier") or declarator.type == "destructor_name":
                return _text(declarator)
            name = declarator.child_by_field_name("name")
            return _text(name) if name is not None else None
        declarator = inner
    # Wrappers (decorators, export, template, Go's type_declaration): the inner one's name.
    for child in node.named_children:
        if child.type in grammar.definitions or child.type in {"type_spec", "class"}:
            found = _node_name(child, grammar)
            if found:
                return found
    kind = node.child_by_field_name("type")  # a Rust impl names the type it implements
    return _text(kind) if kind is not None else None


def _rows(node: Any) -> tuple[int, int]:
    first, (last, column) = node.start_point[0], node.end_point
    # A node ending at column 0 (a trailing newline) ends on the line before.
    return first, last - 1 if column == 0 and last > first else last


def _body(node: Any) -> Any | None:
    """A definition's body node (through a wrapper to the definition it holds)."""
    for field in ("definition", "declaration"):
        inner = node.child_by_field_name(field)
        if inner is not None:
            node = inner
            break
    return node.child_by_field_name("body")


def _header_rows(node: Any, table: LineTable) -> tuple[int, int]:
    """The lines of a definition before its body: decorators and signature."""
    first, last = _rows(node)
    body = _body(node)
    if body is not None:
        row, column = body.start_point
        start, _ = table.span(row, row)
        # A body on its own lines (Python) starts after the header; `{` ends the header line.
        header_end = row - 1 if not table.text[start : start + column].strip() else row
        last = min(last, max(first, header_end))
    else:
        last = first
    return first, min(last, first + _HEADER_LINES - 1)


def _segments(
    node: Any, grammar: Grammar, table: LineTable, max_tokens: int, open_all: bool
) -> list[_Segment]:
    """The children of ``node`` as segments, opening those too large for one chunk.

    ``open_all`` also opens definitions that fit but hold definitions (a class), so that
    each method is a chunk of its own.
    """
    found: list[_Segment] = []
    stack: list[tuple[Any, tuple[str, ...], tuple[tuple[int, int], ...], int, int]] = [
        (child, (), (), max_tokens, -1) for child in reversed(node.children)
    ]
    while stack:
        child, where, around, room, header_end = stack.pop()
        first, last = _rows(child)
        wrapper = child.type in grammar.wrappers
        name = None
        if child.type in grammar.definitions or wrapper:
            name = _node_name(child, grammar)
        is_def = name is not None
        size = table.size(first, last)
        opened = child.child_count and (
            size > room or (open_all and _holds_definitions(child, grammar))
        )
        if opened:
            # A wrapper's parts before its definition (decorators, `export`) are sticky,
            # as is the rest of a header line (a class body's `{`).
            inner_end = first if wrapper else header_end
            path, headers, inner_room = where, around, room
            if is_def and not wrapper:
                # The definition names a level; a wrapper's inner definition does that.
                header = _header_rows(child, table)
                path, headers, inner_end = (*where, name), (*around, header), header[1]
                inner_room = max(room - table.size(*header), room // 2)
            stack.extend(
                (grandchild, path, headers, inner_room, inner_end)
                for grandchild in reversed(child.children)
            )
            continue
        inner = (*where, name) if name else where
        sticky = child.type in _ATTACHED or (not is_def and last <= header_end)
        found.append(_Segment(first, last, inner, is_def, child.type, around, sticky))
    return found


def _holds_definitions(node: Any, grammar: Grammar) -> bool:
    """Whether a definition has definitions among its descendants (a class's methods)."""
    stack = list(node.named_children)  # definitions are named nodes: skip punctuation
    while stack:
        child = stack.pop()
        if child.type in grammar.definitions:
            return True
        if child.named_child_count and child.type not in _COMMENTS:
            stack.extend(child.named_children)
    return False


def _words(name: str) -> str:
    return _CAMEL.sub(" ", name).lower()


@dataclass(eq=False)
class _Packer:
    """Turns segments into chunks: definitions alone (or packed), other statements packed."""

    table: LineTable
    max_tokens: int
    overlap_tokens: int
    module: str
    language: str
    _: dataclasses.KW_ONLY
    merge: bool = False
    chunks: list[SourceChunk] = dataclasses.field(default_factory=list, init=False)
    emitted: int = dataclasses.field(default=-1, init=False)  # last line already in a chunk
    group: list[_Segment] = dataclasses.field(default_factory=list, init=False)
    parent: tuple[str, ...] = dataclasses.field(default=(), init=False)

    def symbol(self, path: tuple[str, ...]) -> str | None:
        return ".".join(p for p in (self.module, *path) if p) or None

    def context(
        self, path: tuple[str, ...], headers: tuple[tuple[int, int], ...], first: int, last: int
    ) -> str:
        """The symbol path, its CamelCase names as words, and the headers not in the chunk."""
        symbol = self.symbol(path)
        if symbol is None:
            return ""
        lines = [symbol]
        words = [_words(name) for name in path if _words(name) != name.lower()]
        if words:
            lines[0] += f" ({' '.join(words)})"
        for header_first, header_last in headers:
            if header_last < first or header_first > last:
                start, end = self.table.span(header_first, header_last)
                lines.extend(line.strip() for line in self.table.text[start:end].split("\n"))
        return "\n".join(line for line in lines if line)

    def size(self, first: int, last: int) -> int:
        return self.table.size(first, last)

    def emit(
        self, first: int, last: int, path: tuple[str, ...], headers: tuple[tuple[int, int], ...]
    ) -> None:
        first = max(first, self.emitted + 1)
        if first > last:
            return
        symbol = self.symbol(path)
        context = self.context(path, headers, first, last)
        chunk = None
        if self.size(first, last) <= self.max_tokens:
            chunk = self.table.chunk(len(self.chunks), first, last, symbol, self.language)
        if chunk is None or chunk.token_count > self.max_tokens:
            # Too large even alone (or lines encode longer together than apart).
            start = len(self.chunks)
            line_windows(
                self.table,
                first,
                last,
                max_tokens=self.max_tokens,
                overlap_tokens=self.overlap_tokens,
                symbol=symbol,
                language=self.language,
                out=self.chunks,
            )
            for at in range(start, len(self.chunks)):
                piece = self.chunks[at]
                piece_context = self.context(
                    path, headers, piece.line_start - 1, piece.line_end - 1
                )
                self.chunks[at] = dataclasses.replace(piece, context=piece_context)
        elif not any(ch.isalnum() for ch in chunk.text) or chunk.text.strip() == "end":
            self._close(chunk)
        else:
            self.chunks.append(dataclasses.replace(chunk, context=context))
        self.emitted = max(self.emitted, last)

    def _close(self, chunk: SourceChunk) -> None:
        """A closing ``}`` or ``end`` ends the chunk before rather than being one."""
        before = self.chunks[-1] if self.chunks else None
        if before is None or not chunk.text.strip():
            return
        joined = self.table.chunk(
            before.index, before.line_start - 1, chunk.line_end - 1, before.symbol, self.language
        )
        if joined.token_count <= self.max_tokens:
            self.chunks[-1] = dataclasses.replace(joined, context=before.context)
        else:
            self.chunks.append(chunk)

    def flush(self) -> None:
        if self.group:
            defs = [s for s in self.group if s.is_def]
            path = defs[0].path if len(defs) == 1 else self.parent
            headers = defs[0].headers if len(defs) == 1 else self.group[-1].headers
            self.emit(self.group[0].first, max(s.last for s in self.group), path, headers)
            self.group = []

    def _leading(self, before: _Segment) -> list[_Segment]:
        """Comments and sticky segments ending the group right above ``before``, taken out
        of the group (they go with it), as long as they fit in one chunk with it."""
        leading: list[_Segment] = []
        while self.group:
            tail = self.group[-1]
            expected = leading[0].first if leading else before.first
            if not tail.sticky and (tail.kind not in _COMMENTS or tail.last + 1 < expected):
                break  # only sticky parts, and comments right above, go with what follows
            if self.size(tail.first, before.last) > self.max_tokens:
                break
            leading.insert(0, self.group.pop())
        return leading

    def add(self, segment: _Segment) -> None:
        if segment.last <= self.emitted:
            return  # its lines went out with the chunk before (it shared a line with it)
        segment.first = max(segment.first, self.emitted + 1)
        group = self.group
        if group and segment.first <= max(s.last for s in group):
            group.append(segment)  # on a line the group already holds: must stay with it
            return
        parent = segment.path[:-1] if segment.is_def else segment.path
        if segment.is_def and not self.merge:
            leading = self._leading(segment)
            self.flush()
            first = leading[0].first if leading else segment.first
            self.emit(first, segment.last, segment.path, segment.headers)
            return
        if group and (
            self.parent != parent or self.size(group[0].first, segment.last) > self.max_tokens
        ):
            leading = self._leading(segment)
            self.flush()
            self.group = leading
        self.group.append(segment)
        self.parent = parent


def _fill_gaps(table: LineTable, chunks: list[SourceChunk], **options: Any) -> list[SourceChunk]:
    """Line windows over non-blank lines no chunk holds (a guard; a parse covers all)."""
    covered = bytearray(len(table))
    for chunk in chunks:
        covered[chunk.line_start - 1 : chunk.line_end] = b"\x01" * (
            chunk.line_end - chunk.line_start + 1
        )
    extra: list[SourceChunk] = []
    line = 0
    while line < len(table):
        if covered[line] or table.is_blank(line):
            line += 1
            continue
        end = line
        while end + 1 < len(table) and not covered[end + 1]:
            end += 1
        line_windows(table, line, end, out=extra, **options)
        line = end + 1
    if not extra:
        return chunks
    merged = sorted([*chunks, *extra], key=lambda c: (c.start, c.end))
    return [dataclasses.replace(c, index=i) for i, c in enumerate(merged)]


def chunk_source(
    text: str,
    *,
    path: str | None = None,
    language: str | None = None,
    max_tokens: int = 256,
    overlap_tokens: int = 32,
    encoding: str = DEFAULT_ENCODING,
    syntax: bool = True,
    merge: bool = False,
) -> list[SourceChunk]:
    """Chunk ``text`` at syntax boundaries when its grammar is installed, else by lines.

    :param path: the file's path (relative paths give nicer symbols); picks the language
        by extension unless ``language`` names one (see :data:`grammars.GRAMMARS`).
    :param max_tokens: the most tokens a chunk holds (one line longer than that is cut).
    :param overlap_tokens: how much consecutive line windows share; syntax chunks do
        not overlap.
    :param syntax: ``False`` always uses line windows (the benchmark's baseline).
    :param merge: pack neighbouring definitions of one parent into one chunk up to
        ``max_tokens`` (never cutting one, and a class that fits stays whole);
        ``False`` (the default) gives each function and method its own chunk.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(
            f"overlap_tokens must be at least 0 and less than max_tokens ({max_tokens}), "
            f"got {overlap_tokens}"
        )
    if not text or text.isspace():
        return []
    table = LineTable(text, encoding)
    language = language or language_of(path)
    parser = load_parser(language) if syntax and language else None
    grammar = grammar_for(language)
    if parser is None or grammar is None:
        return line_windows(table, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    tree = parser.parse(text.encode("utf-8", "surrogatepass"))
    packer = _Packer(
        table, max_tokens, overlap_tokens, module_path(path), grammar.name, merge=merge
    )
    for segment in _segments(tree.root_node, grammar, table, max_tokens, open_all=not merge):
        packer.add(segment)
    packer.flush()
    return _fill_gaps(
        table,
        packer.chunks,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        language=grammar.name,
    )
