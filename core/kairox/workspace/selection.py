"""Which workspace files are indexed, beyond ``.gitignore``: ``[workspace] include``/``exclude``.

Both are lists of gitignore-syntax patterns relative to the workspace root (matched with
``pathspec``'s ``GitIgnoreSpec``, as the ``.gitignore`` files are). ``exclude`` drops
what it matches (a matched folder is not walked at all); ``include``, when given, keeps
only the files it matches. Folders Kairox owns, such as the folders of local knowledge
bases configured inside the workspace and ``$KAIROX_HOME``, are never walked, whatever
the patterns say: indexing them would feed Kairox's own stores back into its results.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

from kairox.support.errors import KairoxError

__all__ = ["FileSelection", "SelectionError"]


class SelectionError(KairoxError, ValueError):
    """An include or exclude pattern that is not valid gitignore syntax."""


def _spec(patterns: Iterable[str], key: str) -> GitIgnoreSpec | None:
    lines = [p for p in patterns if p.strip()]
    if not lines:
        return None
    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError as exc:
        raise SelectionError(
            f"[workspace] {key} holds a pattern that is not valid gitignore syntax ({exc}); "
            'fix or remove it, e.g. exclude = ["build/", "*.min.js"]'
        ) from None


@dataclass(frozen=True)
class FileSelection:
    """The user's include/exclude patterns plus the folders that are never indexed."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    #: Absolute folders never walked (resolved when the selection is made).
    never: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", _spec(self.include, "include"))
        object.__setattr__(self, "_exclude", _spec(self.exclude, "exclude"))
        resolved = frozenset(os.path.realpath(p) for p in self.never)
        object.__setattr__(self, "never", resolved)

    def owns(self, path: str) -> bool:
        """Whether ``path`` is one of the files or folders that are never indexed."""
        return bool(self.never) and os.path.realpath(path) in self.never

    def skips_folder(self, path: str, relpath: str) -> bool:
        """Whether the walk must not enter the folder at ``path`` (``relpath`` in the root)."""
        if self.owns(path):
            return True
        exclude: GitIgnoreSpec | None = self._exclude  # type: ignore[attr-defined]
        return exclude is not None and exclude.match_file(relpath + "/")

    def takes_file(self, relpath: str) -> bool:
        """Whether the file at ``relpath`` is indexed by the patterns."""
        exclude: GitIgnoreSpec | None = self._exclude  # type: ignore[attr-defined]
        if exclude is not None and exclude.match_file(relpath):
            return False
        include: GitIgnoreSpec | None = self._include  # type: ignore[attr-defined]
        return include is None or include.match_file(relpath)

    @classmethod
    def for_workspace(
        cls,
        root: Path,
        *,
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        owned: Iterable[Path] = (),
    ) -> FileSelection:
        """A selection for ``root``; ``owned`` folders outside the root are dropped."""
        base = os.path.realpath(root)
        inside = []
        for folder in owned:
            real = os.path.realpath(folder)
            if real != base and real.startswith(base.rstrip(os.sep) + os.sep):
                # A database file's journal and WAL files belong to it too.
                inside.extend(real + suffix for suffix in ("", "-wal", "-shm", "-journal"))
        return cls(tuple(include), tuple(exclude), frozenset(inside))
