"""Benchmarks behind ``kairox bench``: retrieval quality and speed on BEIR-layout data."""

from __future__ import annotations

from kairox.support.errors import KairoxError

__all__ = ["BENCH_EXTRA", "BenchError", "BenchUsageError"]

#: How to install what the benchmarks need beyond Kairox itself.
BENCH_EXTRA = "pip install 'kairox[bench]'"


class BenchError(KairoxError, ValueError):
    """A benchmark cannot run as asked (unknown system, missing plugin...)."""


class BenchUsageError(BenchError):
    """A benchmark asked for wrongly (an unknown system, profile, knowledge base or kind;
    a bad option): the CLI shows it as a usage error (exit 2). A plain :class:`BenchError`
    (a missing optional dependency, a failed run) is an error (exit 1)."""
