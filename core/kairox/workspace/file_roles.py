"""What a workspace file is for (its role), and which roles a query asks for.

A developer who searches a repository nearly always means the code that does the thing:
on the git-history benchmark (benchmarks/README.md) the changelog, the test modules and
the user guide took rank 1 for most of the questions whose answer was elsewhere. The role
of a file is read from its path alone (``tests/``, ``test_*.py``, ``CHANGELOG.md``,
``docs/``, ``vendor/``...) and is used as a prior on its hits
(:mod:`kairox.workspace.file_ranking`), unless the query names the role: "the test for
digest auth" asks for tests, "the docs page on plugins" for documentation.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = ["ROLE_QUERY_WORDS", "Role", "asked_roles", "role_of"]


class Role(StrEnum):
    """What a file in a workspace is for."""

    IMPLEMENTATION = "implementation"
    TEST = "test"
    DOCS = "docs"
    CHANGELOG = "changelog"
    EXAMPLE = "example"
    BENCHMARK = "benchmark"
    CONFIG = "config"
    GENERATED = "generated"
    VENDORED = "vendored"


_FOLDER = r"(?:^|/)(?:{})/"
_VENDORED = re.compile(
    _FOLDER.format(r"vendor|vendored|third[_-]party|node_modules|bower_components|_vendor"), re.I
)
_GENERATED = re.compile(
    r"\.min\.(?:js|css)$|_pb2(?:_grpc)?\.pyi?$|\.pb\.go$|\.generated\.\w+$|_generated\.\w+$"
    r"|(?:^|/)(?:package-lock\.json|yarn\.lock|pnpm-lock\.yaml|poetry\.lock|uv\.lock"
    r"|Cargo\.lock|go\.sum|Gemfile\.lock|composer\.lock)$",
    re.I,
)
_CHANGELOG = re.compile(
    r"(?:^|/)(?:change[_-]?log|changes|history|news|release[_-]?notes)(?:\.\w+)?$"
    r"|(?:^|/)(?:changelog\.d|changes|newsfragments)/",
    re.I,
)
_TEST = re.compile(
    _FOLDER.format(r"tests?|testing|spec|specs|__tests__|__mocks__|testdata|test[_-]?data")
    + r"|(?:^|/)(?:test_[^/]*|[^/]*_tests?\.\w+|[^/]*\.(?:test|spec)\.\w+|conftest\.py)$",
    re.I,
)
_EXAMPLE = re.compile(_FOLDER.format(r"examples?|samples?|demos?|tutorials?"), re.I)
_BENCHMARK = re.compile(_FOLDER.format(r"benchmarks?|bench|benches|perf"), re.I)
_DOCS = re.compile(
    _FOLDER.format(r"docs?|documentation|site|man")
    + r"|\.(?:md|markdown|rst|adoc|txt|rdoc|texi|org)$"
    + r"|(?:^|/)(?:readme|license|licence|copying|authors|contributors|contributing"
    + r"|code_of_conduct|security|notice)(?:\.\w+)?$",
    re.I,
)
_CONFIG = re.compile(
    r"(?:^|/)\.[^/]+/|(?:^|/)\.[^/]+$"  # dotfiles and dot-folders (.github/, .gitignore)
    r"|\.(?:toml|ini|cfg|ya?ml|json|jsonl|ndjson|csv|tsv|lock|mk|cmake|gradle|properties|editorconfig)$"
    r"|(?:^|/)(?:makefile|gnumakefile|justfile|dockerfile|containerfile|procfile|vagrantfile"
    r"|rakefile|gemfile|cmakelists\.txt|setup\.py|noxfile\.py|tox\.ini|go\.mod)$",
    re.I,
)

# Checked in this order: a changelog under docs/ is a changelog, a test under examples/
# a test, a vendored test a vendored file.
_ORDER: tuple[tuple[Role, re.Pattern[str]], ...] = (
    (Role.VENDORED, _VENDORED),
    (Role.GENERATED, _GENERATED),
    (Role.CHANGELOG, _CHANGELOG),
    (Role.TEST, _TEST),
    (Role.BENCHMARK, _BENCHMARK),
    (Role.EXAMPLE, _EXAMPLE),
    (Role.DOCS, _DOCS),
    (Role.CONFIG, _CONFIG),
)


def role_of(relpath: str) -> Role:
    """The role of the file at ``relpath`` (``/``-separated, relative to the root)."""
    for role, pattern in _ORDER:
        if pattern.search(relpath):
            return role
    return Role.IMPLEMENTATION


#: The query words that ask for a role: a query holding one lifts files of that role
#: (:class:`kairox.workspace.file_ranking.FileRanking`). Whole words, compared
#: lower-cased. Words that a developer mostly means otherwise are left out ("release",
#: "changes", "news", "config", "ci", "workflow", "guide", "spec", "fixture": "the
#: release script", "config loading", "the route spec"); leaving them out raised the
#: history benchmark's test half by 0.003 MRR@10 and lost no role question.
ROLE_QUERY_WORDS: dict[Role, frozenset[str]] = {
    Role.TEST: frozenset({"test", "tests", "testing", "tested", "unittest", "pytest"}),
    Role.DOCS: frozenset({"docs", "doc", "documentation", "readme", "tutorial", "manual", "howto"}),
    Role.CHANGELOG: frozenset({"changelog", "changelogs"}),
    Role.EXAMPLE: frozenset({"example", "examples", "sample", "demo"}),
    Role.BENCHMARK: frozenset({"benchmark", "benchmarks", "bench"}),
    Role.CONFIG: frozenset({"configuration", "makefile", "dockerfile", "pyproject"}),
    Role.GENERATED: frozenset({"generated", "lockfile"}),
    Role.VENDORED: frozenset({"vendored", "vendor"}),
}

_WORD = re.compile(r"[a-z0-9]+")


def asked_roles(query: str) -> frozenset[Role]:
    """The roles ``query`` names (no role at all for most queries)."""
    words = set(_WORD.findall(query.casefold()))
    return frozenset(role for role, asking in ROLE_QUERY_WORDS.items() if words & asking)
