"""Every fenced block of README.md, docs/, benchmarks/ and plugins/*/README.md is checked.

``bash``: each ``kairox ...`` command is resolved against the real click command tree
(subcommands, options, choices, ranges; nothing runs), other commands against an allow-list
(``make`` targets must exist, ``pip install 'kairox[x]'`` extras too). ``toml``: parsed; a
``kairox.toml`` fragment is validated by Kairox's own config loader (a deprecated key fails
too). ``python``: a page's
blocks run in order in one namespace, in a workspace with two notes. ``json``: parsed.
``text`` and ``console`` show output and are not checked.

A block that cannot run says so in its info string, with a reason: ``python fragment:
REASON`` compiles the block and runs its imports from ``kairox`` only; ``LANG no-check:
REASON`` is skipped (``no-check: run by tests/X.py::test_y`` names the test that runs it,
which must exist). The skipped blocks are counted, and their number is capped.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from kairox.cli import build_cli
from kairox.config.loader import load_config
from kairox.config.schema import ALLOWED_TOP_LEVEL
from kairox.plugin_host.manager import get_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    ROOT / "benchmarks" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "plugins").glob("*/README.md")),
]
CHECKED = ("bash", "toml", "python", "json")
SHOWN = ("text", "console")
#: Top-level tables of TOML files other than kairox.toml that the docs show.
OTHER_TOML_TABLES = {"project", "build-system", "tool", "mcp_servers"}
#: The most blocks the docs may leave unchecked; raise it only with a reason in the doc.
MAX_UNCHECKED = 3

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<info>.*)$")
_MODE = re.compile(r"^(?P<mode>no-check|fragment): (?P<reason>\S.*)$")
_RUN_BY = re.compile(r"run by (?P<file>tests/\S+\.py)::(?P<test>\w+)")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its mode and reason, its text."""

    page: Path
    line: int
    lang: str
    mode: str  # "" (checked), "no-check" or "fragment"
    reason: str
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    at = 0
    while at < len(lines):
        fence = _FENCE.match(lines[at])
        if fence is None:
            at += 1
            continue
        indent, info = fence["indent"], fence["info"].strip()
        end = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "```")
        mode = _MODE.match(info)
        body = "\n".join(line.removeprefix(indent) for line in lines[at + 1 : end]) + "\n"
        found.append(
            Block(
                page,
                at + 1,
                fence["lang"],
                mode["mode"] if mode else info,
                mode["reason"] if mode else "",
                body,
            )
        )
        at = end + 1
    return found


BLOCKS = [block for page in PAGES for block in _blocks(page)]


def _of(lang: str) -> list[Block]:
    return [b for b in BLOCKS if b.lang == lang and b.mode != "no-check"]


def test_every_block_names_a_language_and_a_known_mode():
    assert len(BLOCKS) > 40  # the extraction finds the pages' blocks
    for block in BLOCKS:
        assert block.lang in CHECKED + SHOWN, f"{block}: fence language {block.lang!r}"
        assert block.mode in ("", "no-check", "fragment"), f"{block}: info {block.mode!r}"
        assert block.mode != "fragment" or block.lang == "python", f"{block}: fragment"
        assert not block.mode or block.reason, f"{block}: {block.mode} needs ': REASON'"


def test_unchecked_blocks_are_few_and_say_why():
    unchecked = [b for b in BLOCKS if b.mode == "no-check"]
    assert len(unchecked) <= MAX_UNCHECKED, [str(b) for b in unchecked]
    for block in unchecked:
        run_by = _RUN_BY.search(block.reason)
        if run_by:  # the test named as running it exists
            test_file = (ROOT / run_by["file"]).read_text(encoding="utf-8")
            assert f"def {run_by['test']}(" in test_file, f"{block}: {block.reason}"


# -- bash --------------------------------------------------------------------------------

_OPERATORS = {"|", "||", "&&", ";", "&", "(", ")"}
_REDIRECTS = {">", ">>", "<", "<<", ">&", "2>"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")


def _commands(script: str) -> list[list[str]]:
    """The simple commands of a script: continuations joined, heredoc bodies and
    redirections dropped, split at pipes, lists and subshells, assignments stripped."""
    commands: list[list[str]] = []
    lines = iter(script.replace("\\\n", " ").splitlines())
    for line in lines:
        heredoc = _HEREDOC.search(line)
        if heredoc:
            for body in lines:
                if body.strip() == heredoc[1]:
                    break
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command: list[str] = []
        skip_next = False
        for token in [*lexer, ";"]:
            if skip_next:
                skip_next = False
            elif token in _REDIRECTS:
                skip_next = True
            elif token in _OPERATORS:
                while command and _ASSIGNMENT.match(command[0]) and len(command) > 1:
                    command.pop(0)
                if command:
                    commands.append(command)
                command = []
            else:
                command.append(token)
    return commands


def _check_kairox(args: list[str]) -> None:
    """Resolve ``kairox ARGS`` down to its command and parse its options; nothing runs."""
    command: click.Command = build_cli()
    ctx: click.Context | None = None
    name = "kairox"
    while True:
        try:
            ctx = command.make_context(name, list(args), parent=ctx)
        except click.exceptions.Exit:  # --help, --version
            return
        except click.BadParameter as error:
            # A path the reader supplies (~/papers, run.json) need not exist here.
            if isinstance(error.param and error.param.type, click.Path | click.File):
                return
            raise
        if not isinstance(command, click.Group):
            return
        # A group's options precede its subcommand, whose arguments are ctx.args.
        rest = args[len(args) - len(ctx.args) - 1 :]
        name, found, args = command.resolve_command(ctx, rest)
        assert found is not None
        command = found


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))


def _check_make(args: list[str]) -> None:
    targets = [a for a in args if not a.startswith("-") and "=" not in a]
    assert set(targets) <= _make_targets(), f"no such make target: {targets}"


def _check_pip(args: list[str]) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for arg in args:
        named = re.fullmatch(r"kairox\[([\w,-]+)\]", arg)
        if named:
            assert set(named[1].split(",")) <= set(extras), f"no such extra: {arg}"


#: Commands other than kairox that the docs may show, and how each is checked.
ALLOWED: dict[str, Callable[[list[str]], None] | None] = {
    "kairox": _check_kairox,
    "make": _check_make,
    "pip": _check_pip,
    "cd": None,
    "export": None,
    "source": None,
    "git": None,
    "cat": None,  # writes an example file (heredoc)
    "printf": None,  # pipes prompts into kairox chat
    "python": None,  # makes a token
    "claude": None,  # Claude Code's own CLI: how a client adds the server
    "pytest": None,  # a plugin's own tests
}


@pytest.mark.parametrize("block", _of("bash"), ids=str)
def test_bash_block_commands_exist(block: Block):
    commands = _commands(block.text)
    assert commands, f"{block}: no command found"
    for command in commands:
        program = command[0].rsplit("/", 1)[-1]
        assert program in ALLOWED, f"{block}: {command[0]!r} is not on the allow-list"
        check = ALLOWED[program]
        if check is not None:
            try:
                check(command[1:])
            except click.ClickException as error:
                pytest.fail(f"{block}: {shlex.join(command)}: {error.format_message()}")


def test_a_renamed_command_or_option_fails_the_check():
    _check_kairox(["search", "--chunks", "-k", "5", "retry"])
    _check_kairox(["--config", "kairox.toml", "kb", "ingest", "papers", "/missing/dir"])
    for wrong in (["serch", "x"], ["search", "--chunk", "x"], ["search", "--fusion", "max", "x"]):
        with pytest.raises(click.UsageError):
            _check_kairox(wrong)
    with pytest.raises(AssertionError):
        _check_make(["demos"])
    assert _commands("A=1 kairox index | cat > out\ncat > f <<'EOF'\nkairox x\nEOF\n") == [
        ["kairox", "index"],
        ["cat"],
        ["cat"],
    ]


# -- toml and json -----------------------------------------------------------------------


@pytest.mark.parametrize("block", _of("toml"), ids=str)
def test_toml_block_parses_and_kairox_config_validates(block: Block, workspace: Path):
    document = tomllib.loads(block.text)
    tables = set(document)
    if tables <= OTHER_TOML_TABLES:
        return  # a plugin's pyproject.toml, an MCP client's config
    assert tables <= set(ALLOWED_TOP_LEVEL), f"{block}: {tables - set(ALLOWED_TOP_LEVEL)}"
    config = workspace / "kairox.toml"
    config.write_text(block.text, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # a deprecated key is stale
        load_config(cwd=workspace, config_path=config, registry=get_plugin_manager().registry)


@pytest.mark.parametrize("block", _of("json"), ids=str)
def test_json_block_parses(block: Block):
    json.loads(block.text)


# -- python ------------------------------------------------------------------------------


def _kairox_imports(source: str) -> str:
    """The block's imports from Kairox, whose names a rename would break."""

    def from_kairox(node: ast.stmt) -> bool:
        if isinstance(node, ast.ImportFrom):
            return (node.module or "").split(".")[0] == "kairox"
        return isinstance(node, ast.Import) and node.names[0].name.split(".")[0] == "kairox"

    imports = [node for node in ast.parse(source).body if from_kairox(node)]
    return ast.unparse(ast.Module(body=imports, type_ignores=[]))


@pytest.mark.parametrize(
    "page", sorted({b.page for b in _of("python")}), ids=lambda p: str(p.relative_to(ROOT))
)
def test_python_blocks_run(page: Path, workspace: Path):
    (workspace / "notes.md").write_text("# Uploads\n\nFailed uploads retry with backoff.\n")
    (workspace / "other.md").write_text("# Lunch\n\nThe canteen opens at noon.\n")
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    for block in (b for b in _of("python") if b.page == page):
        code = compile(block.text, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if block.mode == "fragment":
            exec(compile(_kairox_imports(block.text), str(block), "exec"), {})
        else:
            exec(code, namespace)


# -- links -------------------------------------------------------------------------------

_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, - for spaces."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_heading(page: Path):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    for link in _LINK.finditer(text):
        target = link["target"]
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.relative_to(ROOT)}: {target} does not exist"
        if anchor:
            assert anchor in _anchors(linked), f"{page.relative_to(ROOT)}: no heading #{anchor}"
