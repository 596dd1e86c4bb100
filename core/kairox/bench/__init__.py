"""Benchmarks behind ``kairox bench``: retrieval quality and speed on BEIR-layout data."""

from __future__ import annotations

from kairox.errors import KairoxError

__all__ = ["BENCH_EXTRA", "BenchError"]

#: How to install what the benchmarks need beyond Kairox itself.
BENCH_EXTRA = "pip install 'kairox[bench]'"


class BenchError(KairoxError, ValueError):
    """A benchmark cannot run as asked (unknown system, missing plugin...)."""
