"""Which tree-sitter grammars Kairox can use, and what counts as a definition in each.

Each grammar comes from its own PyPI wheel (``tree-sitter-python``, ``tree-sitter-go``...,
core dependencies of ``kairox``), which ships the compiled parser: nothing is downloaded at
run time. A language whose wheel (or the ``tree-sitter`` bindings) is missing or broken is
simply not available, and its files are chunked by line windows instead.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

__all__ = [
    "GRAMMARS",
    "Grammar",
    "grammar_for",
    "grammar_status",
    "language_of",
    "load_parser",
]


@dataclass(frozen=True)
class Grammar:
    """One language: the wheel that holds its grammar and the node types that define things.

    ``definitions`` are the node types that become chunks of their own and name a level
    of the symbol path (functions, classes, methods, impls...). ``wrappers`` are nodes
    that hold one definition and should travel with it (Python decorators, JavaScript
    ``export``).
    """

    name: str
    package: str
    module: str
    extensions: tuple[str, ...]
    definitions: frozenset[str]
    attr: str = "language"
    wrappers: frozenset[str] = frozenset()


_C_DEFS = frozenset(
    {"function_definition", "struct_specifier", "enum_specifier", "union_specifier"}
)
_JS_DEFS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "method_definition",
        "lexical_declaration",
    }
)
_TS_DEFS = _JS_DEFS | {
    "interface_declaration",
    "abstract_class_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "module",
    "internal_module",
}

#: Every language Kairox can chunk by syntax when its wheel is installed.
GRAMMARS: tuple[Grammar, ...] = (
    Grammar(
        "python",
        "tree-sitter-python",
        "tree_sitter_python",
        (".py", ".pyi"),
        frozenset({"function_definition", "class_definition", "decorated_definition"}),
        wrappers=frozenset({"decorated_definition"}),
    ),
    Grammar(
        "javascript",
        "tree-sitter-javascript",
        "tree_sitter_javascript",
        (".js", ".mjs", ".cjs", ".jsx"),
        _JS_DEFS,
        wrappers=frozenset({"export_statement"}),
    ),
    Grammar(
        "typescript",
        "tree-sitter-typescript",
        "tree_sitter_typescript",
        (".ts", ".mts", ".cts"),
        _TS_DEFS,
        attr="language_typescript",
        wrappers=frozenset({"export_statement"}),
    ),
    Grammar(
        "tsx",
        "tree-sitter-typescript",
        "tree_sitter_typescript",
        (".tsx",),
        _TS_DEFS,
        attr="language_tsx",
        wrappers=frozenset({"export_statement"}),
    ),
    Grammar(
        "go",
        "tree-sitter-go",
        "tree_sitter_go",
        (".go",),
        frozenset({"function_declaration", "method_declaration", "type_declaration"}),
    ),
    Grammar(
        "rust",
        "tree-sitter-rust",
        "tree_sitter_rust",
        (".rs",),
        frozenset(
            {
                "function_item",
                "impl_item",
                "struct_item",
                "enum_item",
                "trait_item",
                "mod_item",
                "macro_definition",
            }
        ),
    ),
    Grammar(
        "java",
        "tree-sitter-java",
        "tree_sitter_java",
        (".java",),
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "method_declaration",
                "constructor_declaration",
            }
        ),
    ),
    Grammar("c", "tree-sitter-c", "tree_sitter_c", (".c", ".h"), _C_DEFS),
    Grammar(
        "cpp",
        "tree-sitter-cpp",
        "tree_sitter_cpp",
        (".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx"),
        _C_DEFS | {"class_specifier", "namespace_definition", "template_declaration"},
    ),
    Grammar(
        "ruby",
        "tree-sitter-ruby",
        "tree_sitter_ruby",
        (".rb",),
        frozenset({"method", "singleton_method", "class", "module"}),
    ),
)

_BY_NAME = {g.name: g for g in GRAMMARS}
_BY_EXTENSION = {ext: g for g in GRAMMARS for ext in g.extensions}


def language_of(path: str | None) -> str | None:
    """The language a file's extension says (``"python"`` for ``a/b.py``), or None."""
    if not path:
        return None
    grammar = _BY_EXTENSION.get(PurePosixPath(path).suffix.lower())
    return grammar.name if grammar else None


def grammar_for(language: str | None) -> Grammar | None:
    """The :class:`Grammar` named ``language``, or None for an unknown one."""
    return _BY_NAME.get(language) if language else None


@functools.cache
def load_parser(language: str) -> Any | None:
    """A tree-sitter ``Parser`` for ``language``, or None when its wheel is not installed.

    Cached: loading a grammar costs a few milliseconds and parsers are reusable.
    """
    grammar = grammar_for(language)
    if grammar is None:
        return None
    try:
        import tree_sitter

        module = importlib.import_module(grammar.module)
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, grammar.attr)()))
    except (ImportError, AttributeError, ValueError):
        # Missing wheel, or one built for an incompatible tree-sitter ABI: line windows.
        return None


def grammar_status() -> list[tuple[str, str, bool]]:
    """``(language, package, installed)`` for every known grammar, for ``kairox plugins``."""
    return [(g.name, g.package, load_parser(g.name) is not None) for g in GRAMMARS]
