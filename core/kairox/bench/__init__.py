"""Benchmarks behind ``kairox bench``: retrieval quality and speed on BEIR-layout data."""
