"""Judged queries from a git repository's own history (``kairox bench history``).

Each non-merge commit that changed one to three *source* files gives a query, its subject
line cleaned of pull-request numbers, conventional prefixes (``fix:``, ``feat(x):``,
``[core]``) and trailing noise (``--with-body`` adds the body), and its answers: those
source files, under their path at HEAD. A source file is one of a language Kairox chunks
by syntax (:mod:`kairox.workspace.grammars`) that is not a test, documentation, an
example, CI, build configuration, vendored or generated code
(:func:`kairox.bench.history_paths.is_source`); those files are still indexed, they only
never count as answers.

Commits are read newest first, so a file renamed later is followed to its path at HEAD
and a file deleted since is dropped; a commit whose answers are all gone is skipped.
Merges, reverts, release and version bumps, formatting, lint, typo and style commits,
and dependency bumps (dependabot, renovate, ``bump X from 1 to 2``) are skipped too, each
with its reason, as are duplicate queries (the newest commit keeps the text). The newest
``limit`` usable commits are kept and split by time: the oldest share is ``train``, the
newest ``test`` (tuning reads ``train``, figures are quoted on ``test``).
"""

from __future__ import annotations

import re
import subprocess
import tarfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kairox.bench import BenchError, BenchUsageError
from kairox.bench.history_paths import is_source

__all__ = [
    "Commit",
    "History",
    "HistoryQuery",
    "assign_splits",
    "clean_subject",
    "export_head",
    "extract",
    "read_commits",
    "skip_reason",
]

#: Source files a commit may change and still give a query.
MAX_SOURCE_FILES = 3
#: Share of the kept queries, newest last, that form the ``test`` split.
TEST_SHARE = 0.5
SPLITS = ("train", "test", "all")

# Why a commit gave no query: the keys of ``History.skipped``.
MERGE = "merge"
REVERT = "revert"
DEPENDENCIES = "dependency bump"
RELEASE = "release or version bump"
FORMATTING = "formatting, lint, typo or style"
NO_SOURCE = "no source file changed"
TOO_MANY = f"more than {MAX_SOURCE_FILES} source files changed"
GONE = "its source files are gone at HEAD"
EMPTY = "no words left in the subject"
DUPLICATE = "duplicate query"
OLDER = "older than the newest --limit queries"

_BOTS = re.compile(r"dependabot|renovate|pre-commit-ci|greenkeeper|snyk-bot", re.I)
_DEPENDENCY = re.compile(
    r"^(?:(?:build|chore|fix|ci)\((?:deps|deps-dev|dependencies)\)|deps(?:-dev)?)\s*:"
    r"|^(?:bump|upgrade|update|pin)\s+\S+\s+(?:from\s+\S+\s+)?to\s+v?\d"
    r"|^(?:bump|upgrade|update|pin)\s+(?:the\s+)?(?:dev\s+)?(?:dependencies|deps|requirements)\b",
    re.I,
)
_RELEASE = re.compile(
    r"^(?:release|releasing|prepare(?:\s+for)?\s+release|bump(?:ed)?\s+(?:the\s+)?version)\b"
    r"|^v?\d+\.\d+(?:\.\d+)*\S*$"
    r"|^(?:chore\(release\)|release)\s*:"
    r"|^(?:start|set|update|bump)\s+(?:to\s+)?version\b"
    r"|\bversion\s+(?:bump|v?\d+\.\d+)"
    r"|^(?:bump|release)\s+(?:to\s+)?v?\d+\.\d+",
    re.I,
)
# Formatting commits: a formatter or linter named, or "format" as what the commit does
# ("Format code", "fix formatting"), not "fix formatting of help text" (output formatting).
_FORMATTING = re.compile(
    r"^style(?:\([^)]*\))?!?:"
    r"|^(?:run\s+|apply\s+|fix\s+|update\s+)?(?:re)?format(?:s|ting|ted)?\b(?!\s+(?:of|for|in)\b)"
    r"|\b(?:reformat\w*|black|isort|prettier|gofmt|rustfmt|clippy|flake8|ruff|eslint|pre-commit"
    r"|pyupgrade|lint|lints|linter|linting|typos?|spelling|misspell\w*|whitespace"
    r"|code\s+style|code\s+format\w*)\b",
    re.I,
)
_CONVENTIONAL = re.compile(
    r"^(?:fix|fixes|fixed|feat|feature|chore|docs?|refactor|perf|tests?|build|ci|style"
    r"|revert|bugfix|hotfix|improvement|enhancement|breaking|security|deps|misc|change|update)"
    r"(?:\([^)]*\))?!?\s*:\s*",
    re.I,
)
_TAGS = re.compile(r"^(?:\[[^\]]*\]\s*)+")
_ISSUE_REFS = re.compile(
    r"\s*\((?:(?:closes|fixes|fix|resolves|see|refs?|pr|gh)\s*)?#\d+(?:\s*,\s*#?\d+)*\)"
    r"|\s*\[(?:skip ci|ci skip|no ci)\]"
    r"|\s+(?:closes|fixes|resolves|refs?)\s+#\d+"
    r"|\s*(?:gh-|#)\d+\s*$",
    re.I,
)
_WORD = re.compile(r"\w", re.UNICODE)


@dataclass(frozen=True)
class Commit:
    """One commit as ``git log`` tells it: ``changes`` are ``(status, old, new)`` paths."""

    sha: str
    parents: tuple[str, ...]
    time: int
    author: str
    subject: str
    body: str
    changes: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class HistoryQuery:
    """A judged query: the commit's cleaned text and its source files at HEAD."""

    id: str
    text: str
    answers: tuple[str, ...]
    commit: str
    time: int
    split: str = "test"


@dataclass
class History:
    """The queries of one repository and why every other commit gave none."""

    repo: str
    head: str
    queries: list[HistoryQuery]
    skipped: dict[str, int] = field(default_factory=dict)
    #: ``(commit, subject, reason)`` for each skipped commit, newest first.
    skipped_commits: list[tuple[str, str, str]] = field(default_factory=list)

    def split(self, name: str) -> list[HistoryQuery]:
        """The queries of ``train``, ``test`` or ``all``."""
        if name not in SPLITS:
            raise BenchUsageError(f"unknown split {name!r}; choose one of: {', '.join(SPLITS)}")
        return [q for q in self.queries if name == "all" or q.split == name]


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise BenchError("the history benchmark needs git on PATH") from None
    if done.returncode != 0:
        raise BenchUsageError(
            f"{repo} is not a git repository with commits (git {args[0]}: "
            f"{done.stderr.strip() or done.returncode}); pass a checkout or a bare git folder"
        )
    return done.stdout


def _parse_changes(raw: str) -> tuple[tuple[str, str, str], ...]:
    tokens = raw.lstrip("\0\n").split("\0")
    changes: list[tuple[str, str, str]] = []
    i = 0
    while i < len(tokens):
        status = tokens[i].strip()
        if not status:
            i += 1
            continue
        if status[0] in "RC":  # renamed or copied: old path, then new path
            if i + 2 >= len(tokens):
                break
            changes.append((status[0], tokens[i + 1], tokens[i + 2]))
            i += 3
        elif i + 1 < len(tokens):
            changes.append((status[0], tokens[i + 1], tokens[i + 1]))
            i += 2
        else:
            break
    return tuple(changes)


def read_commits(repo: Path) -> Iterator[Commit]:
    """Every commit reachable from HEAD, newest first, with its changed paths (renames
    detected). Read as a stream, so a caller that stops early reads no further."""
    fields = "%H%x1f%P%x1f%ct%x1f%an <%ae>%x1f%s%x1f%b%x1f"
    command = [
        "git",
        "-C",
        str(repo),
        "-c",
        "core.quotepath=off",
        "log",
        "-z",
        "-M",
        "--name-status",
        f"--format=%x1e{fields}",
        "HEAD",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as git:
        assert git.stdout is not None
        pending = b""
        try:
            while chunk := git.stdout.read(1 << 16):
                pending += chunk
                *records, pending = pending.split(b"\x1e")
                for record in records:
                    if record:
                        yield _commit(record)
            if pending:
                yield _commit(pending)
        finally:
            git.kill()


def _commit(record: bytes) -> Commit:
    sha, parents, time, author, subject, body, rest = record.decode("utf-8", "replace").split(
        "\x1f", 6
    )
    return Commit(
        sha=sha,
        parents=tuple(parents.split()),
        time=int(time),
        author=author,
        subject=subject.strip(),
        body=body.strip(),
        changes=_parse_changes(rest),
    )


def clean_subject(subject: str) -> str:
    """The subject without tags, conventional prefixes, issue numbers and trailing noise."""
    text = subject.strip()
    for _ in range(3):  # "[core] fix(x): ..." has two layers
        before = text
        text = _TAGS.sub("", text).strip()
        text = _CONVENTIONAL.sub("", text).strip()
        if text == before:
            break
    text = _ISSUE_REFS.sub("", text).strip()
    return text.rstrip(" .;:,-").strip()


def skip_reason(commit: Commit) -> str | None:
    """Why ``commit`` gives no query before its files are looked at, or None."""
    if len(commit.parents) > 1:
        return MERGE
    if re.match(r"^revert\b", commit.subject, re.I) or "This reverts commit" in commit.body:
        return REVERT
    if _RELEASE.search(commit.subject):
        return RELEASE
    if _BOTS.search(commit.author) or _DEPENDENCY.search(commit.subject):
        return DEPENDENCIES
    if _FORMATTING.search(commit.subject):
        return FORMATTING
    return None


def _head_files(repo: Path) -> tuple[str, set[str]]:
    head = _git(repo, "rev-parse", "HEAD").strip()
    listing = _git(repo, "-c", "core.quotepath=off", "ls-tree", "-r", "-z", "--name-only", head)
    return head, {p for p in listing.split("\0") if p}


def extract(
    repo: Path,
    *,
    with_body: bool = False,
    limit: int | None = 400,
    test_share: float = TEST_SHARE,
    max_source_files: int = MAX_SOURCE_FILES,
) -> History:
    """The judged queries of ``repo`` (a checkout or a bare git folder); see the module docs.

    ``limit`` keeps the newest usable commits only (None: every one).
    """
    if not 0 <= test_share <= 1:
        raise BenchUsageError(f"the test share must lie between 0 and 1, got {test_share}")
    repo = Path(repo)
    head, at_head = _head_files(repo)
    history = History(repo=str(repo), head=head, queries=[])
    reasons: Counter[str] = Counter()
    # path in a commit -> its path at HEAD, from the renames of the newer commits read so far.
    renamed: dict[str, str] = {}
    seen: set[str] = set()
    kept: list[HistoryQuery] = []

    def skip(commit: Commit, reason: str) -> None:
        reasons[reason] += 1
        history.skipped_commits.append((commit.sha, commit.subject, reason))

    for commit in read_commits(repo):
        reason = skip_reason(commit)
        sources = [new for _, _, new in commit.changes if is_source(new)]
        answers = tuple(
            dict.fromkeys(
                renamed.get(new, new)
                for status, _, new in commit.changes
                if status != "D"
                and is_source(new)
                and renamed.get(new, new) in at_head
                and is_source(renamed.get(new, new))  # not moved into tests/ or docs/ since
            )
        )
        for status, old, new in commit.changes:
            if status == "R":
                renamed[old] = renamed.get(new, new)
        if reason is None:
            if not sources:
                reason = NO_SOURCE
            elif len(sources) > max_source_files:
                reason = TOO_MANY.replace(str(MAX_SOURCE_FILES), str(max_source_files))
            elif not answers:
                reason = GONE
        text = clean_subject(commit.subject)
        if reason is None and not _WORD.search(text):
            reason = EMPTY
        if with_body and commit.body:
            text = f"{text}\n\n{commit.body}"
        key = " ".join(text.lower().split())
        if reason is None and key in seen:
            reason = DUPLICATE
        if reason is None and limit is not None and len(kept) >= limit:
            reason = OLDER
        if reason is not None:
            skip(commit, reason)
            continue
        seen.add(key)
        kept.append(HistoryQuery(commit.sha[:12], text, answers, commit.sha, commit.time))
    history.skipped = dict(reasons.most_common())
    history.queries = assign_splits(kept, test_share)
    return history


def assign_splits(queries: Sequence[HistoryQuery], test_share: float) -> list[HistoryQuery]:
    """``queries`` oldest first, the oldest ``1 - test_share`` as ``train``, the rest ``test``."""
    ordered = sorted(queries, key=lambda q: (q.time, q.commit))
    cut = len(ordered) - round(len(ordered) * test_share)
    return [
        HistoryQuery(q.id, q.text, q.answers, q.commit, q.time, "train" if i < cut else "test")
        for i, q in enumerate(ordered)
    ]


def export_head(repo: Path, dest: Path) -> Path:
    """The tree at HEAD of ``repo`` written into ``dest``, a new or empty folder: what the
    benchmark indexes, so uncommitted edits never count."""
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise BenchUsageError(
            f"{dest} is not empty; give an empty or new folder to export HEAD into"
        )
    command = ["git", "-C", str(repo), "archive", "--format=tar", "HEAD"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as git:
        assert git.stdout is not None
        with tarfile.open(fileobj=git.stdout, mode="r|") as archive:
            archive.extractall(dest, filter="data")
        error = git.stderr.read().decode("utf-8", "replace") if git.stderr else ""
    if git.returncode != 0:
        raise BenchError(f"git archive HEAD failed in {repo}: {error.strip()}")
    return dest
