"""Syntax-aware chunks: source code cut at function, class and method boundaries.

:func:`chunk_source` is the one entry point for any text, code or not: given the text
and its path (or language), it parses it with the language's tree-sitter grammar
(:mod:`kairox.workspace.grammars`) when one is installed and packs whole lines into
:class:`~kairox.workspace.line_chunks.SourceChunk` windows otherwise.

With a grammar, neighbouring definitions (functions, classes, methods, impls...) of one
parent and the statements between them are packed into chunks of up to ``max_tokens``,
never cutting a definition that fits (``merge=False``: one definition per chunk, with the
comments right above it; on the code benchmark packing did better, benchmarks/README.md).
A definition too large for one chunk is opened and its children are chunked the same way
(a class becomes its header plus its methods; a long function is cut between statements),
so the cuts fall at the innermost boundaries that make the pieces fit. A single node still
too large (a huge literal) falls back to line windows. Each chunk names the symbol it
holds (or, holding several, their parent), ``module.Class.method`` with the module taken
from the path. Chunks always start and end
at line boundaries and never overlap; every non-blank line is in one.
"""

from __future__ import annotations

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
# Values that make a JavaScript `const f = ...` a definition.
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "class", "generator_function"}
)


@dataclass
class _Segment:
    """A run of whole lines (0-based, inclusive) that one node covers."""

    first: int
    last: int
    path: tuple[str, ...]
    is_def: bool
    kind: str


def module_path(path: str | None) -> str:
    """The dotted module a file's path names: ``src/pkg/mod.py`` -> ``src.pkg.mod``."""
    if not path:
        return ""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] in {"__init__", "index", "mod"} and len(parts) > 1:
        parts.pop()  # a package's own file speaks for the package
    return ".".join(p for p in parts if p not in {"", "."})


def _node_name(node: Any, grammar: Grammar) -> str | None:
    """The name a definition node declares, or None when it declares none."""
    if node.type == "lexical_declaration":
        for child in node.named_children:
            value = child.child_by_field_name("value")
            if value is not None and value.type in _FUNCTION_VALUES:
                name = child.child_by_field_name("name")
                return name.text.decode("utf-8", "replace") if name is not None else None
        return None
    name = node.child_by_field_name("name")
    if name is not None:
        return name.text.decode("utf-8", "replace")
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            if declarator.type.endswith("identifier") or declarator.type == "destructor_name":
                return declarator.text.decode("utf-8", "replace")
            name = declarator.child_by_field_name("name")
            return name.text.decode("utf-8", "replace") if name is not None else None
        declarator = inner
    # Wrappers (decorators, export, template, Go's type_declaration): the inner one's name.
    for child in node.named_children:
        if child.type in grammar.definitions or child.type in {"type_spec", "class"}:
            found = _node_name(child, grammar)
            if found:
                return found
    return None


def _rows(node: Any) -> tuple[int, int]:
    first, (last, column) = node.start_point[0], node.end_point
    # A node ending at column 0 (a trailing newline) ends on the line before.
    return first, last - 1 if column == 0 and last > first else last


def _segments(
    node: Any, path: tuple[str, ...], grammar: Grammar, table: LineTable, max_tokens: int
) -> list[_Segment]:
    """The children of ``node`` as segments, opening those too large for one chunk."""
    found: list[_Segment] = []
    stack = [(child, path) for child in reversed(node.children)]
    while stack:
        child, where = stack.pop()
        first, last = _rows(child)
        name = None
        is_def = child.type in grammar.definitions or child.type in grammar.wrappers
        if is_def:
            name = _node_name(child, grammar)
            is_def = name is not None
        inner = (*where, name) if name else where
        size = table.size(first, last)
        if size > max_tokens and child.child_count:
            stack.extend((grandchild, inner) for grandchild in reversed(child.children))
            continue
        found.append(_Segment(first, last, inner, is_def, child.type))
    return found


class _Packer:
    """Turns segments into chunks: definitions alone, other statements packed."""

    def __init__(
        self,
        table: LineTable,
        max_tokens: int,
        overlap_tokens: int,
        module: str,
        language: str,
        *,
        merge: bool = True,
    ) -> None:
        self.table = table
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.module = module
        self.language = language
        self.chunks: list[SourceChunk] = []
        self.emitted = -1  # last line already in a chunk
        self.group: list[_Segment] = []
        self.parent: tuple[str, ...] = ()
        self.merge = merge

    def symbol(self, path: tuple[str, ...]) -> str | None:
        return ".".join(p for p in (self.module, *path) if p) or None

    def size(self, first: int, last: int) -> int:
        return self.table.size(first, last)

    def emit(self, first: int, last: int, path: tuple[str, ...]) -> None:
        first = max(first, self.emitted + 1)
        if first > last:
            return
        symbol = self.symbol(path)
        if self.size(first, last) > self.max_tokens:
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
        else:
            chunk = self.table.chunk(len(self.chunks), first, last, symbol, self.language)
            if chunk.token_count > self.max_tokens:  # lines encode longer together than apart
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
            elif chunk.text.strip():
                self.chunks.append(chunk)
        self.emitted = max(self.emitted, last)

    def flush(self) -> None:
        if self.group:
            defs = [s for s in self.group if s.is_def]
            path = defs[0].path if len(defs) == 1 else self.parent
            self.emit(self.group[0].first, max(s.last for s in self.group), path)
            self.group = []

    def _leading_comments(self, before: _Segment) -> list[_Segment]:
        """Comments ending the group right above ``before``, taken out of the group."""
        leading: list[_Segment] = []
        while self.group and self.group[-1].kind in _COMMENTS:
            expected = leading[0].first if leading else before.first
            if self.group[-1].last + 1 < expected:
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
            # Comments right above a definition document it: they go with it.
            leading = self._leading_comments(segment)
            self.flush()
            first = leading[0].first if leading else segment.first
            self.emit(first, segment.last, segment.path)
            return
        if group and (
            self.parent != parent or self.size(group[0].first, segment.last) > self.max_tokens
        ):
            leading = self._leading_comments(segment) if segment.is_def else []
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
    return [
        SourceChunk(
            i, c.text, c.start, c.end, c.token_count, c.line_start, c.line_end, c.symbol, c.language
        )
        for i, c in enumerate(merged)
    ]


def chunk_source(
    text: str,
    *,
    path: str | None = None,
    language: str | None = None,
    max_tokens: int = 256,
    overlap_tokens: int = 32,
    encoding: str = DEFAULT_ENCODING,
    syntax: bool = True,
    merge: bool = True,
) -> list[SourceChunk]:
    """Chunk ``text`` at syntax boundaries when its grammar is installed, else by lines.

    :param path: the file's path (relative paths give nicer symbols); picks the language
        by extension unless ``language`` names one (see :data:`grammars.GRAMMARS`).
    :param max_tokens: the most tokens a chunk holds (one line longer than that is cut).
    :param overlap_tokens: how much consecutive line windows share; syntax chunks do
        not overlap.
    :param syntax: ``False`` always uses line windows (the benchmark's baseline).
    :param merge: pack neighbouring small definitions of one parent into one chunk up to
        ``max_tokens`` (never cutting one); ``False`` gives each definition its own chunk.
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
    for segment in _segments(tree.root_node, (), grammar, table, max_tokens):
        packer.add(segment)
    packer.flush()
    return _fill_gaps(
        table,
        packer.chunks,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        language=grammar.name,
    )
