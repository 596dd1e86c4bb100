"""Fixtures for the benchmark tests: tiny BEIR-layout datasets made by the test, a
workspace whose knowledge base holds the corpus, and the CLI with every installed plugin."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from kairox.cli import build_cli
from kairox.cli.app import AppContext
from kairox.plugin_host.manager import build_plugin_manager
from kairox.testing import CORPUS, EXPECTED, CorpusDocument

KB_TOML = """# the benchmark's workspace: comments must survive `bench tune --write`
[knowledge_bases.papers]
kind = "sqlite-fts"
path = "papers.db"   # the corpus
timeout_ms = 60000

[workspace]
disabled_retrievers = ["workspace", "workspace-fts"]
"""


def variants() -> list[tuple[str, str, str]]:
    """(query id, text, relevant id): three phrasings of each EXPECTED query (24)."""
    found = []
    for number, (text, doc) in enumerate(EXPECTED):
        words = text.split()
        for n, phrasing in enumerate([text, " ".join(reversed(words)), " ".join(words[:2])]):
            found.append((f"q{number}-{n}", phrasing, doc))
    return found


def write_beir(
    root: Path,
    corpus: Iterable[CorpusDocument],
    queries: Iterable[tuple[str, str]],
    qrels: Iterable[tuple[str, str]],
) -> Path:
    """A BEIR-layout folder: the documents, the ``(id, text)`` queries, and the test split's
    ``(query id, relevant document id)`` judgments (grade 1)."""
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc in corpus:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries)
    )
    rows = ["query-id\tcorpus-id\tscore"] + [f"{qid}\t{doc}\t1" for qid, doc in qrels]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
def dataset(tmp_path):
    judged = [(f"q{number}", text, doc) for number, (text, doc) in enumerate(EXPECTED)]
    queries = [(qid, text) for qid, text, _ in judged] + [("unjudged", "nothing")]
    qrels = [(qid, doc) for qid, _, doc in judged]
    return write_beir(tmp_path / "tiny-beir", CORPUS, queries, qrels)


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    """24 judged queries (three phrasings of each EXPECTED query): enough to tune on."""
    judged = variants()
    queries = [(qid, text) for qid, text, _ in judged]
    qrels = [(qid, doc) for qid, _, doc in judged]
    return write_beir(tmp_path / "tiny-beir-24", CORPUS, queries, qrels)


@pytest.fixture
def pm():
    """The built-in plugins only (no entry points)."""
    return build_plugin_manager(entry_points=False)


def command_cli(command: click.Command, pm=None) -> click.Group:
    """A root group holding just ``command``, its app context on ``pm`` (default: a fresh
    plugin manager of the built-ins, made when the command runs)."""

    @click.group()
    @click.pass_context
    def root(ctx: click.Context) -> None:
        ctx.obj = AppContext(pm=pm if pm is not None else build_plugin_manager(entry_points=False))

    root.add_command(command)
    return root


@pytest.fixture(scope="module")
def plugin_manager():
    return build_plugin_manager()


@pytest.fixture
def invoke(plugin_manager) -> Callable[..., Result]:
    """``kairox ARGS`` in-process with the built-ins and every installed plugin, in the
    test's workspace."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(build_cli(plugin_manager), [str(a) for a in args])

    return run


def corpus_jsonl(path: Path, *, id_prefix: str = "") -> Path:
    with path.open("w") as handle:
        for doc in CORPUS:
            record = {"id": id_prefix + doc.id, "title": doc.title, "text": doc.text}
            handle.write(json.dumps(record) + "\n")
    return path


@pytest.fixture
def kb_workspace(workspace: Path, invoke) -> Path:
    """A workspace with knowledge base ``papers`` (sqlite-fts) holding the corpus."""
    (workspace / "kairox.toml").write_text(KB_TOML)
    result = invoke("kb", "ingest", "papers", corpus_jsonl(workspace / "corpus.jsonl"))
    assert result.exit_code == 0, result.output
    return workspace


class GitRepo:
    """A git repository the test writes commit by commit, one day apart, oldest first."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.day = 0
        root.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, author: str = "Ada <ada@example.com>") -> str:
        import subprocess

        name, email = author.rstrip(">").split(" <")
        stamp = f"{1704067200 + self.day * 86400} +0000"
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.root),
            "PATH": os.environ["PATH"],
        }
        done = subprocess.run(
            ["git", "-C", str(self.root), *args], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def commit(
        self,
        subject: str,
        files: dict[str, str | None] | None = None,
        *,
        body: str = "",
        author: str = "Ada <ada@example.com>",
    ) -> str:
        """Write (text) or delete (None) ``files``, commit them; returns the sha."""
        for relpath, text in (files or {}).items():
            path = self.root / relpath
            if text is None:
                self.git("rm", "-q", relpath)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            self.git("add", relpath)
        self.day += 1
        message = subject + (f"\n\n{body}" if body else "")
        self.git("commit", "-q", "--allow-empty", "-m", message, author=author)
        return self.git("rev-parse", "HEAD").strip()

    def move(self, old: str, new: str, subject: str) -> str:
        self.git("mv", old, new)
        return self.commit(subject)


def source(name: str, words: str) -> str:
    """A small Python module defining ``name`` whose docstring holds ``words``."""
    return f'def {name}(value):\n    """{words}"""\n    return value\n'


@pytest.fixture
def history_repo(tmp_path: Path) -> GitRepo:
    """A repository with every kind of commit the history benchmark must tell apart:
    see tests/bench/test_history.py for what each gives."""
    repo = GitRepo(tmp_path / "history-repo")
    repo.commit(
        "Initial layout",
        {
            "src/pkg/core.py": source("run_core", "the core loop"),
            "src/pkg/util.py": source("shared_helper", "small helpers"),
            "src/pkg/tokenizer.py": source("tokenize_text", "split text into tokens"),
            "src/pkg/parser.py": source("parse_config", "parse configuration values"),
            "README.md": "# pkg\n",
            "tests/test_core.py": "def test_core():\n    assert True\n",
            "docs/index.md": "# docs\n",
        },
    )
    repo.commit(
        "add parser for config values (#12)",
        {
            "src/pkg/parser.py": source("parse_config", "parse configuration values and lists"),
            "tests/test_parser.py": "def test_parser():\n    pass\n",
        },
    )
    repo.commit(
        "fix(tokenizer): handle empty input in tokenizer",
        {"src/pkg/tokenizer.py": source("tokenize_text", "split text into tokens, empty too")},
    )
    repo.commit("Bump version to 1.2.0", {"src/pkg/__init__.py": '__version__ = "1.2.0"\n'})
    repo.commit(
        'Revert "handle empty input"',
        {"src/pkg/util.py": source("shared_helper", "small helpers again")},
        body="This reverts commit 0123456789abcdef.",
    )
    repo.commit(
        "Run black over the code", {"src/pkg/core.py": source("run_core", "the core  loop")}
    )
    repo.commit(
        "build(deps): bump requests from 2.31 to 2.32",
        {"requirements.txt": "requests==2.32\n"},
        author="dependabot[bot] <bot@example.com>",
    )
    repo.move("src/pkg/tokenizer.py", "src/pkg/lexer.py", "rename the tokenizer to lexer")
    repo.commit("add legacy helper", {"src/pkg/legacy.py": source("legacy_helper", "old code")})
    repo.commit("remove legacy helper", {"src/pkg/legacy.py": None})
    repo.commit("cover the lexer", {"tests/test_lexer.py": "def test_lexer():\n    pass\n"})
    repo.commit(
        "share helpers between core and util",
        {
            "src/pkg/core.py": source("run_core", "the core loop with shared helpers"),
            "src/pkg/util.py": source("shared_helper", "helpers shared with core"),
            "tests/test_core.py": "def test_core():\n    assert 1\n",
        },
    )
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit(
        "[core] teach the parser about lists",
        {"src/pkg/parser.py": source("parse_config", "lists")},
    )
    repo.git("checkout", "-q", "main")
    repo.day += 1
    repo.git("merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
    repo.commit(
        "Add parser for config values",
        {"src/pkg/parser.py": source("parse_config", "parse configuration values, lists too")},
    )
    repo.commit("document the parser", {"docs/parser.md": "# parser\n"})
    return repo


TOPICS = ["retry", "cookie", "proxy", "stream", "timeout", "redirect"]
WORDS = ["budget", "limits", "headers", "backoff"]


@pytest.fixture
def long_history_repo(tmp_path: Path) -> GitRepo:
    """24 one-file commits over six modules, each about one topic and one word: enough
    queries to tune on (``bench tune`` wants 20)."""
    repo = GitRepo(tmp_path / "long-history")
    for word in WORDS:
        for topic in TOPICS:
            text = "".join(
                source(f"{topic}_{w}", f"{topic} {w}") for w in WORDS[: WORDS.index(word) + 1]
            )
            repo.commit(f"teach the {topic} module about {word}", {f"src/{topic}.py": text})
    return repo
