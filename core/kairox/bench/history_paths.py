"""Which changed files can answer a history query: source files, not tests or docs.

A file is *source* when its extension is one of a language Kairox chunks by syntax
(:data:`kairox.workspace.grammars.GRAMMARS`) and its path does not mark it as a test
(``tests/``, ``test_x.py``, ``x_test.go``, ``x.spec.ts``, ``FooTest.java``, ``conftest.py``),
documentation or an example (``docs/``, ``examples/``), CI or build configuration
(``.github/``, ``setup.py``, ``noxfile.py``, ``build.rs``), vendored or generated code
(``vendor/``, ``third_party/``, ``node_modules/``, ``*_pb2.py``, ``*.pb.go``, ``*.min.js``).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from kairox.workspace.grammars import language_of

__all__ = ["is_source", "role_of"]

_TEST_DIRS = frozenset(
    {"test", "tests", "testing", "__tests__", "__test__", "spec", "specs", "testdata", "e2e"}
)
_DOC_DIRS = frozenset(
    {"doc", "docs", "documentation", "docs_src", "example", "examples", "_examples", "demo"}
)
_CONFIG_DIRS = frozenset({".github", ".circleci", ".gitlab", ".buildkite", ".ci", ".devcontainer"})
_VENDOR_DIRS = frozenset({"vendor", "vendored", "_vendor", "third_party", "node_modules"})
_CONFIG_FILES = frozenset(
    {
        "setup.py",
        "noxfile.py",
        "fabfile.py",
        "conftest.py",
        "build.rs",
        "gulpfile.js",
        "gruntfile.js",
        "webpack.config.js",
        "rollup.config.js",
        "eslint.config.js",
        "eslint.config.mjs",
        "jest.config.js",
        "vite.config.ts",
        "babel.config.js",
    }
)
_TEST_NAME = re.compile(
    r"^(?:test_.*|.*_test|.*_tests|.*\.test|.*\.spec|.*_spec|.*Tests?|Test.*|tests?)$"
)
_GENERATED_NAME = re.compile(r"(?:_pb2(?:_grpc)?\.pyi?|\.pb\.go|\.min\.js|\.generated\.\w+)$")


def role_of(path: str) -> str:
    """``implementation``, ``test``, ``docs``, ``config``, ``vendored`` or ``other``
    (a language Kairox does not chunk by syntax)."""
    pure = PurePosixPath(path)
    folders = {part.lower() for part in pure.parts[:-1]}
    stem = pure.name.split(".", 1)[0] if pure.name.count(".") > 1 else pure.stem
    if folders & _VENDOR_DIRS or _GENERATED_NAME.search(pure.name):
        return "vendored"
    if folders & _TEST_DIRS or _TEST_NAME.match(stem) or _TEST_NAME.match(pure.stem):
        return "test"
    if folders & _CONFIG_DIRS or pure.name.lower() in _CONFIG_FILES:
        return "config"
    if folders & _DOC_DIRS:
        return "docs"
    if language_of(path) is None:
        return "other"
    return "implementation"


def is_source(path: str) -> bool:
    """Whether a changed ``path`` can be a history query's answer (see the module docs)."""
    return role_of(path) == "implementation"
