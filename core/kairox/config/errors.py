"""What is wrong with a configuration: :class:`ConfigProblem` (the file, the table, the
key, the problem and the fix) and :class:`ConfigError`, which lists them all; with a
did-you-mean for a misspelt name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "ConfigProblem"]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the configuration, and how to fix it.

    :param file: the file the problem is in (``None`` when not tied to a file).
    :param table: the dotted table name, e.g. ``"knowledge_bases.papers"``.
    :param key: the key inside the table, e.g. ``"profile_aliases"``.
    :param problem: what is wrong.
    :param fix: what to do about it.
    """

    file: Path | None
    table: str | None
    key: str | None
    problem: str
    fix: str

    def __str__(self) -> str:
        parts: list[str] = []
        if self.file is not None:
            parts.append(f"{self.file}:")
        if self.table is not None:
            parts.append(f"[{self.table}]")
        if self.key is not None:
            parts.append(f"{self.key}:")
        parts.append(self.problem)
        text = " ".join(parts)
        if self.fix:
            if not text.endswith((".", "?", "!")):
                text += "."
            text += f" Fix: {self.fix}"
        return text


class ConfigError(Exception):
    """The configuration is invalid; ``problems`` lists everything that is wrong."""

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problems,))


def _did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    matches = get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _suggest(problem: str, word: str, candidates: Iterable[str]) -> str:
    """``problem``, ending in "; did you mean 'X'?" when a candidate X is close to ``word``."""
    suggestion = _did_you_mean(word, candidates)
    return f"{problem}; did you mean {suggestion!r}?" if suggestion else problem


def _rename_or(problem: str, word: str, candidates: Iterable[str], fix: str) -> tuple[str, str]:
    """The problem and fix for an unknown ``word``: rename it to a close candidate, else ``fix``."""
    suggestion = _did_you_mean(word, candidates)
    if suggestion is None:
        return problem, fix
    return f"{problem}; did you mean {suggestion!r}?", f"rename it to {suggestion!r}"
