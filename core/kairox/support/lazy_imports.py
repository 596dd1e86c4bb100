"""One way for a plugin to import an optional library on first use.

In the habit of haystack's ``LazyImport``: a plugin declares the library once, with what
needs it and how to install it; nothing is imported until the first use, and a missing
library then raises an :class:`ImportError` that says what to install, chained to (and
recorded from) the original error::

    TANTIVY = LazyImport("tantivy", needed_by="the tantivy knowledge-base kind",
                         install="pip install kairox-tantivy")
    tantivy = TANTIVY.load()      # imports, or raises with the hint
    TANTIVY.check()               # finds it without importing (for start-up checks)
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import ModuleType

__all__ = ["LazyImport"]


class LazyImport:
    """Optional modules imported on first use, with an install hint when they are missing.

    :param modules: the modules to import, the first being the one :meth:`load` returns
        (later ones are submodules or companions that must import too).
    :param needed_by: what needs them, for the message ("the tantivy knowledge-base kind").
    :param install: the command that installs them ("pip install kairox-tantivy").
    :param distributions: the distribution that provides a module, where its name differs.
    """

    def __init__(
        self,
        *modules: str,
        needed_by: str,
        install: str,
        distributions: Mapping[str, str] | None = None,
    ) -> None:
        if not modules:
            raise ValueError("LazyImport needs at least one module name")
        self.modules = modules
        self.needed_by = needed_by
        self.install = install
        self.distributions = dict(distributions or {})
        #: the ImportError of the last failed :meth:`load` or :meth:`check`, if any
        self.error: ImportError | None = None

    def load(self) -> ModuleType:
        """Import the modules (every call: ``sys.modules`` makes a repeat cheap) and return
        the first; raise an :class:`ImportError` with the install hint if one is missing."""
        loaded: list[ModuleType] = []
        for module in self.modules:
            try:
                loaded.append(importlib.import_module(module))
            except ImportError as exc:
                raise self._missing(exc.name or module, cause=exc) from exc
        self.error = None
        return loaded[0]

    def check(self) -> None:
        """Raise the :meth:`load` error unless every module can be found, importing none
        (``find_spec``), so a check at start-up keeps heavy libraries unloaded."""
        for module in self.modules:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):  # a parent missing, or sys.modules[name] None
                found = False
            if not found:
                raise self._missing(module)
        self.error = None

    def available(self) -> bool:
        """Whether :meth:`check` would pass."""
        try:
            self.check()
        except ImportError:
            return False
        return True

    def _missing(self, module: str, cause: ImportError | None = None) -> ImportError:
        top = module.split(".")[0]
        package = self.distributions.get(module, self.distributions.get(top, top))
        detail = f" ({cause})" if cause is not None and str(cause) else ""
        error = ImportError(
            f"{self.needed_by} needs the {package!r} package, which is not installed"
            f"{detail}: {self.install}",
            name=top,
        )
        self.error = error
        return error
