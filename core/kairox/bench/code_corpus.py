"""The code search benchmark's corpus: Python sdists with their docstrings taken out.

From each sdist (a ``.tar.gz`` from ``pip download --no-binary :all: --no-deps``) the
package's Python files are copied with every docstring removed (module, class and
function docstrings), and each public function or method with a docstring becomes a query:
the docstring's first line, whose target is the function's file and line range *in the
stripped copy*. Tests, docs, examples and build scripts are left out. Functions and
classes whose names start with ``_`` are private and give no query (modules may be
private: httpx keeps all its code in ``httpx/_*.py``).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kairox.bench import BenchError

__all__ = ["CodeQuery", "build_corpus", "strip_docstrings"]

# Folders whose files are not the package's own code.
_NOT_SOURCE = frozenset(
    {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "tools", "scripts"}
)
_NOT_SOURCE_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py"})
#: A docstring line shorter than this many words says too little to be a query.
MIN_QUERY_WORDS = 3


@dataclass(frozen=True)
class CodeQuery:
    """One query: a docstring's first line and where its function lies (1-based lines)."""

    id: str
    text: str
    relpath: str
    line_start: int
    line_end: int
    split: str  # "train" or "test", fixed by a hash of the id


def _docstring_nodes(tree: ast.Module) -> list[tuple[ast.Expr, int]]:
    """Each docstring statement and the number of statements in its body."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.append((body[0], len(body)))
    return found


def _char_col(line: str, byte_col: int) -> int:
    """ast column offsets count UTF-8 bytes; string slicing counts characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def strip_docstrings(source: str) -> str:
    """``source`` with every docstring removed: whole lines where the docstring had its
    own lines, else replaced by ``...`` so the code still parses."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = sorted(_docstring_nodes(tree), key=lambda item: item[0].lineno, reverse=True)
    for node, body_size in edits:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start = _char_col(lines[first], node.col_offset)
        end = _char_col(lines[last], node.end_col_offset or 0)
        before, after = lines[first][:start], lines[last][end:]
        if body_size > 1 and not before.strip() and not after.strip():
            del lines[first : last + 1]
        else:
            lines[first : last + 1] = [before + "..." + after]
    return "".join(lines)


def _public_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(qualname, node)`` of public module functions and methods of public classes."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if not node.name.startswith("_"):
                    found.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def _split(query_id: str) -> str:
    return "train" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "test"


def _is_source(relpath: PurePosixPath) -> bool:
    return (
        relpath.suffix == ".py"
        and relpath.name not in _NOT_SOURCE_FILES
        and not _NOT_SOURCE.intersection(relpath.parts[:-1])
    )


def _extract(archive: Path, into: Path) -> Path:
    """Unpack one sdist under ``into`` (data-only filter: no links out, no devices)."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    tops = sorted(p for p in into.iterdir() if p.is_dir())
    if len(tops) != 1:
        raise BenchError(f"{archive.name}: expected one top folder, found {len(tops)}")
    return tops[0]


def build_corpus(sdists: Path, work: Path) -> list[CodeQuery]:
    """Write the stripped copies under ``work / "corpus"`` and return the queries.

    ``sdists`` holds ``.tar.gz`` sdists. Reruns overwrite ``work``'s corpus.
    """
    archives = sorted(Path(sdists).glob("*.tar.gz"))
    if not archives:
        raise BenchError(
            f"no .tar.gz sdists in {sdists}; fetch some with `pip download --no-binary :all: "
            f"--no-deps click rich httpx -d {sdists}`"
        )
    corpus = Path(work) / "corpus"
    for stale in (corpus, Path(work) / "sdists"):
        shutil.rmtree(stale, ignore_errors=True)
    queries: list[CodeQuery] = []
    for archive in archives:
        project = archive.name.removesuffix(".tar.gz").rsplit("-", 1)[0].lower()
        top = _extract(archive, Path(work) / "sdists" / project)
        for path in sorted(top.rglob("*.py")):
            rel = PurePosixPath(path.relative_to(top).as_posix())
            if not _is_source(rel):
                continue
            source = path.read_text(encoding="utf-8")
            try:
                original, stripped = ast.parse(source), strip_docstrings(source)
            except SyntaxError:
                continue  # a file for another Python version: not part of the benchmark
            relpath = f"{project}/{rel}"
            target = corpus / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(stripped, encoding="utf-8")
            # Stripping removes no definition, so both walks list the same ones in order.
            after = _public_functions(ast.parse(stripped))
            seen: set[str] = set()
            for (qualname, node), (_, where) in zip(
                _public_functions(original), after, strict=True
            ):
                doc = ast.get_docstring(node, clean=False)
                if not doc or qualname in seen:
                    continue  # a method redefined (a property's setter): the first counts
                seen.add(qualname)
                first = inspect.cleandoc(doc).strip().split("\n")[0].strip()
                if len(first.split()) < MIN_QUERY_WORDS:
                    continue
                query_id = f"{relpath}:{qualname}"
                queries.append(
                    CodeQuery(
                        query_id,
                        first,
                        relpath,
                        where.lineno
                        if not where.decorator_list
                        else where.decorator_list[0].lineno,
                        where.end_lineno or where.lineno,
                        _split(query_id),
                    )
                )
    return queries
