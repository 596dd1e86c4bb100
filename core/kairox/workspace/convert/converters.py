"""The converters in force, by file suffix, and reading a file through them.

A file no converter claims is read as UTF-8 text (binary files are skipped), exactly as
before converters existed; a claimed file is read as bytes and converted. A converter
that fails skips that one file with the reason, so one bad PDF never stops a run. A
claimed file that would unpack (a ZIP bomb) or convert into more than its bounds
(:mod:`kairox.workspace.convert.limits`) is skipped the same way, before it is parsed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kairox.workspace.convert.base import ConversionError, Converted, ConverterSpec
from kairox.workspace.convert.limits import ConversionLimits, check_text, check_unpacked
from kairox.workspace.convert.text import plain
from kairox.workspace.files import (
    DEFAULT_MAX_BYTES,
    Skipped,
    read_file_bytes,
    read_file_text,
)

__all__ = ["CONVERSION_FAILED", "CONVERTER_MISSING", "Converters", "read_file_bytes"]

#: Why a claimed file was skipped, as counted in index and ingest summaries.
CONVERSION_FAILED = "conversion failed"
CONVERTER_MISSING = "converter not installed"


class Converters:
    """Converters by suffix; a later spec's claim on a suffix replaces an earlier one's."""

    def __init__(
        self, specs: Iterable[ConverterSpec] = (), *, limits: ConversionLimits | None = None
    ) -> None:
        self.limits = limits or ConversionLimits()
        self.by_suffix: dict[str, ConverterSpec] = {}
        for spec in specs:
            for suffix in spec.suffixes:
                self.by_suffix[suffix.lower()] = spec

    @classmethod
    def builtin(cls, *, limits: ConversionLimits | None = None) -> Converters:
        """The built-in converters, for callers with no plugin registry at hand."""
        from kairox.workspace.convert.builtin import BUILTIN_CONVERTERS

        return cls(BUILTIN_CONVERTERS, limits=limits)

    def claiming(self, path: Path | str) -> ConverterSpec | None:
        """The converter for ``path``'s suffix, if any."""
        return self.by_suffix.get(Path(path).suffix.lower())

    def read(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Converted | Skipped:
        """``path`` converted, or as plain text when unclaimed; or why it was skipped."""
        spec = self.claiming(path)
        if spec is None:
            text = read_file_text(path, max_bytes=max_bytes)
            return text if isinstance(text, Skipped) else plain(text)
        data = read_file_bytes(path, max_bytes=max_bytes)
        if isinstance(data, Skipped):
            return data
        try:
            check_unpacked(data, self.limits)
            converted = spec.convert(data, path.name)
            check_text(converted.text, self.limits)
            return converted
        except ImportError as exc:
            return Skipped(CONVERTER_MISSING, str(exc))
        except ConversionError as exc:
            return Skipped(CONVERSION_FAILED, f"{spec.name}: {exc}")
        except Exception as exc:  # a plugin's converter must not stop the run either
            return Skipped(CONVERSION_FAILED, f"{spec.name}: {type(exc).__name__}: {exc}")
