"""Syntax-aware chunks: one tree-sitter test per language family, plus the invariants."""

from __future__ import annotations

import pytest

from kairox.workspace.code_chunks import chunk_source, module_path
from kairox.workspace.grammars import GRAMMARS, grammar_status, language_of, load_parser

# (path, source, symbols expected among the chunks, each with its first line)
SAMPLES = {
    "python": (
        "pkg/geometry.py",
        "import math\n\n\nclass Circle:\n    def area(self):\n        return math.pi\n\n\n"
        "@cache\ndef unit():\n    return Circle()\n",
        {"pkg.geometry.Circle.area": 4, "pkg.geometry.unit": 9},
    ),
    "javascript": (
        "web/app.js",
        "import x from 'y';\n\nfunction render(node) {\n  return node;\n}\n\n"
        "export class Widget {\n  draw() { return 1; }\n}\n\nconst paint = () => 2;\n",
        # A class is opened: its header travels with its first method.
        {"web.app.render": 3, "web.app.Widget.draw": 7, "web.app.paint": 11},
    ),
    "typescript": (
        "src/shapes.ts",
        "interface Shape {\n  area(): number;\n}\n\nexport function total(s: Shape[]): number {\n"
        "  return 0;\n}\n",
        {"shapes.Shape": 1, "shapes.total": 5},  # a leading src/ is layout, not a module
    ),
    "tsx": (
        "ui/button.tsx",
        "export function Button(): JSX.Element {\n  return <button>ok</button>;\n}\n",
        {"ui.button.Button": 1},
    ),
    "go": (
        "cmd/main.go",
        "package main\n\n// Point is a point.\ntype Point struct {\n\tX int\n}\n\n"
        "func (p Point) Norm() int {\n\treturn p.X\n}\n\nfunc main() {}\n",
        {"cmd.main.Point": 3, "cmd.main.Norm": 8, "cmd.main.main": 12},
    ),
    "rust": (
        "src/lib.rs",
        "/// A point.\nstruct Point { x: i32 }\n\nimpl Point {\n    fn norm(&self) -> i32 {\n"
        "        self.x\n    }\n}\n",
        {"lib.Point": 1, "lib.Point.norm": 4},
    ),
    "java": (
        "app/Greeter.java",
        "package app;\n\npublic class Greeter {\n    public String greet(String n) {\n"
        '        return "hi " + n;\n    }\n}\n',
        {"app.Greeter.Greeter.greet": 3},
    ),
    "c": (
        "lib/math.c",
        "#include <stdio.h>\n\nstruct vec { int x; };\n\nint add(int a, int b) {\n"
        "    return a + b;\n}\n",
        {"lib.math.vec": 3, "lib.math.add": 5},
    ),
    "cpp": (
        "lib/shape.cpp",
        "namespace geo {\nclass Square {\n public:\n  int side() { return 1; }\n};\n}\n\n"
        "int twice(int v) {\n  return 2 * v;\n}\n",
        {"lib.shape.geo.Square": 1, "lib.shape.geo.Square.side": 4, "lib.shape.twice": 8},
    ),
    "ruby": (
        "lib/greeter.rb",
        "module Talk\n  class Greeter\n    def hello\n      'hi'\n    end\n  end\nend\n\n"
        "def shout(s)\n  s.upcase\nend\n",
        {"lib.greeter.Talk.Greeter.hello": 1, "lib.greeter.shout": 9},
    ),
}


def _assert_whole_lines(text: str, chunks) -> None:
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.start == 0 or text[chunk.start - 1] == "\n"  # starts a line
        assert chunk.end == len(text) or text[chunk.end] == "\n"  # ends a line
        assert text.count("\n", 0, chunk.start) + 1 == chunk.line_start
        assert chunk.line_end == chunk.line_start + chunk.text.count("\n")


def test_every_grammar_of_the_code_extra_is_installed_and_loads_offline():
    status = {name: ok for name, _, ok in grammar_status()}
    assert status == {g.name: True for g in GRAMMARS}


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_each_definition_is_a_chunk_with_its_symbol_and_lines(language):
    path, source, expected = SAMPLES[language]
    assert language_of(path) == language
    chunks = chunk_source(source, path=path, merge=False)
    _assert_whole_lines(source, chunks)
    assert {c.language for c in chunks} == {language}
    found = {c.symbol: c.line_start for c in chunks}
    for symbol, line in expected.items():
        assert found.get(symbol) == line, (symbol, found)
    # Every non-blank line is in some chunk, and chunks do not overlap.
    covered = [n for c in chunks for n in range(c.line_start, c.line_end + 1)]
    assert len(covered) == len(set(covered))
    blank = {n for n, line in enumerate(source.split("\n"), 1) if not line.strip()}
    assert set(range(1, source.count("\n") + 1)) - blank <= set(covered)


def test_each_function_is_a_chunk_unless_merging_packs_neighbours():
    source = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(6))
    alone = chunk_source(source, path="m.py")
    assert [c.symbol for c in alone] == [f"m.f{i}" for i in range(6)]
    merged = chunk_source(source, path="m.py", merge=True)
    assert len(merged) == 1 and merged[0].symbol == "m"  # several definitions: the module


def test_an_oversized_class_is_cut_at_its_methods():
    methods = "".join(
        f"    def method_{i}(self):\n" + "".join(f"        v{j} = {j} * {i}\n" for j in range(6))
        for i in range(8)
    )
    source = f"class Big:\n    size = 1\n\n{methods}"
    chunks = chunk_source(source, path="pkg/big.py", max_tokens=80, overlap_tokens=10)
    _assert_whole_lines(source, chunks)
    assert max(c.token_count for c in chunks) <= 80
    # The class header and its attributes are one chunk; every method is its own chunk,
    # found by its class: the class header is in each method's context.
    assert (chunks[0].line_start, chunks[0].line_end, chunks[0].symbol) == (1, 2, "pkg.big.Big")
    assert [c.symbol for c in chunks[1:]] == [f"pkg.big.Big.method_{i}" for i in range(8)]
    assert all(c.context.splitlines()[1:] == ["class Big:"] for c in chunks[1:])
    # No method is split across chunks: each method's first and last line share a chunk.
    for i in range(8):
        first = source.split("\n").index(f"    def method_{i}(self):") + 1
        holder = next(c for c in chunks if c.line_start <= first <= c.line_end)
        assert holder.line_end >= first + 6


def test_an_oversized_function_is_cut_between_statements_not_mid_line():
    body = "".join(f"    total += compute_value({i}, factor={i * 3})\n" for i in range(200))
    source = f"def huge():\n    total = 0\n{body}    return total\n"
    chunks = chunk_source(source, path="h.py", max_tokens=64, overlap_tokens=8)
    assert len(chunks) > 5
    _assert_whole_lines(source, chunks)
    assert all(c.symbol == "h.huge" and c.token_count <= 64 for c in chunks)


def test_unknown_languages_and_syntax_off_get_line_windows():
    text = "".join(f"line {i} of a plain text file\n" for i in range(300))
    for chunks in (
        chunk_source(text, path="notes.txt", max_tokens=64, overlap_tokens=8),
        chunk_source("def f():\n    pass\n" * 100, path="a.py", syntax=False, max_tokens=64),
    ):
        assert len(chunks) > 1
        assert all(c.symbol is None and c.language is None for c in chunks)
    _assert_whole_lines(text, chunks := chunk_source(text, path="notes.txt", max_tokens=64))
    # Consecutive windows overlap by whole lines.
    assert chunks[1].line_start <= chunks[0].line_end


def test_a_broken_file_still_chunks_every_line():
    source = "def ok():\n    return 1\n\ndef broken(:\n    ???\n\nclass Fine:\n    pass\n"
    chunks = chunk_source(source, path="b.py", merge=False)
    _assert_whole_lines(source, chunks)
    covered = {n for c in chunks for n in range(c.line_start, c.line_end + 1)}
    assert {1, 2, 4, 5, 7, 8} <= covered


def test_module_path_and_parser_cache():
    assert module_path("src/pkg/__init__.py") == "pkg"
    assert module_path("tools/src/pkg/core.py") == "pkg.core"
    assert module_path("src.py") == "src"
    assert module_path("a/b.rs") == "a.b"
    assert load_parser("python") is load_parser("python")
    assert load_parser("cobol") is None
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_source("x = 1\n", path="x.py", max_tokens=8, overlap_tokens=8)


def test_a_method_carries_its_symbol_path_and_class_header_as_context():
    source = (
        "import functools\n\n\n@functools.total_ordering\nclass ProgressBar(Base):\n"
        "    width = 10\n\n    @property\n    def pct(self) -> float:\n        return 0.5\n\n"
        "    def update(self, n):\n        self.n += n\n"
    )
    chunks = chunk_source(source, path="src/pkg/bars.py")
    _assert_whole_lines(source, chunks)
    by_symbol = {c.symbol: c for c in chunks}
    # A decorated method keeps its decorator; no symbol names its class twice.
    pct = by_symbol["pkg.bars.ProgressBar.pct"]
    assert pct.text.startswith("    @property\n    def pct(self)")
    assert pct.context.splitlines() == [
        "pkg.bars.ProgressBar.pct (progress bar)",
        "class ProgressBar(Base):",
    ]
    # The class header (and its decorator) is a chunk with the class's attributes.
    header = by_symbol["pkg.bars.ProgressBar"]
    assert (header.line_start, header.line_end) == (4, 6)
    assert header.context == "pkg.bars.ProgressBar (progress bar)"


def test_a_long_functions_pieces_name_its_signature_and_the_first_holds_it():
    body = "".join(f"    total += compute_value({i}, factor={i * 3})\n" for i in range(40))
    source = f"@cached\ndef huge(a: int,\n         b: int) -> int:\n{body}    return total\n"
    chunks = chunk_source(source, path="h.py", max_tokens=120, overlap_tokens=8)
    assert len(chunks) > 2
    assert chunks[0].text.startswith("@cached\ndef huge(a: int,")
    assert chunks[0].line_end > 3  # the signature is not a chunk of its own
    for piece in chunks[1:]:
        assert piece.context.splitlines() == [
            "h.huge",
            "def huge(a: int,",
            "b: int) -> int:",
        ]


def test_a_closing_brace_ends_the_chunk_before_it():
    source = "class Box {\n  open() {\n    return 1;\n  }\n  shut() {\n    return 0;\n  }\n}\n"
    chunks = chunk_source(source, path="box.js")
    assert [(c.symbol, c.line_start, c.line_end) for c in chunks] == [
        ("box.Box.open", 1, 4),
        ("box.Box.shut", 5, 8),
    ]
    assert chunks[1].context.splitlines() == ["box.Box.shut", "class Box {"]
