"""``kairox bench embed``: speed rounds, agreement, FLOP accounting and nDCG."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kairox import hookimpl
from kairox.bench.beir import load_beir
from kairox.bench.embed import (
    EmbedBenchError,
    benchmark_embed,
    minilm_flops,
    peak_flops,
)
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.plugin_host.manager import build_plugin_manager
from kairox.plugin_host.registry import EmbeddingBackendSpec
from kairox.testing import CORPUS, registered_plugin


class Noisy(HashingEmbedder):
    """The hashing vectors plus a little noise: agrees with ``hashing``, but not fully."""

    def __init__(self) -> None:
        super().__init__(384)
        self.name = "noisy"

    def embed(self, texts):
        vectors = super().embed(texts) + 0.05
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Plugin:
    @hookimpl
    def kairox_register_embedding_backends(self, register):
        register(EmbeddingBackendSpec(name="noisy", factory=Noisy))


@pytest.fixture
def registry():
    with registered_plugin(Plugin(), "noisy", build_plugin_manager(entry_points=False)) as pm:
        yield pm.registry


def test_report_times_every_backend_each_round_against_the_first(dataset, registry):
    report = benchmark_embed(load_beir(dataset), ["hashing", "noisy"], registry, rounds=3)
    assert report["documents"] == len(CORPUS) and report["reference"] == "hashing"
    rows = {row["backend"]: row for row in report["backends"]}
    assert len(rows["hashing"]["seconds"]) == len(rows["noisy"]["seconds"]) == 3
    assert rows["hashing"]["cosine_min"] == pytest.approx(1.0, abs=1e-6)
    assert rows["hashing"]["speedup"] == pytest.approx(1.0)
    assert 0.5 < rows["noisy"]["cosine_min"] < 0.9999
    assert rows["noisy"]["cosine_min"] <= rows["noisy"]["cosine_mean"]
    assert rows["noisy"]["docs_per_s"] > 0
    assert rows["noisy"]["gflops"] is None  # no backend here counts MiniLM tokens
    assert "ndcg@10_dense" not in rows["noisy"]


def test_ndcg_of_dense_and_hybrid_per_backend(dataset, registry, tmp_path):
    report = benchmark_embed(
        load_beir(dataset), ["hashing"], registry, rounds=1, ndcg=True, cache_dir=tmp_path
    )
    (row,) = report["backends"]
    assert 0 < row["ndcg@10_dense"] <= 1 and 0 < row["ndcg@10_hybrid"] <= 1
    assert (tmp_path / "hashing").is_dir()  # a cache folder per backend


def test_unknown_backend_and_bad_rounds_are_refused(dataset, registry):
    data = load_beir(dataset)
    with pytest.raises(EmbedBenchError, match=r"no embedding backend 'nope'.*hashing"):
        benchmark_embed(data, ["hashing", "nope"], registry)
    with pytest.raises(EmbedBenchError, match="rounds"):
        benchmark_embed(data, ["hashing"], registry, rounds=0)


def test_flop_accounting():
    # one 10-token text: 6 layers x (10 x 2 x (4*384^2 + 2*384*1536) + 4*384*100)
    expected = 6 * (10 * 2 * (4 * 384 * 384 + 2 * 384 * 1536) + 4 * 384 * 100)
    assert minilm_flops([10]) == pytest.approx(expected)
    assert minilm_flops([10, 10]) == pytest.approx(2 * expected)
    wide = peak_flops({"avx512f", "avx512_vnni"}, cores=2, ghz=2.0)
    assert wide["fp32"] == pytest.approx(2 * 2e9 * 16 * 4)
    assert wide["int8"] == pytest.approx(4 * wide["fp32"])
    assert wide["bf16"] == wide["fp32"]  # no avx512_bf16: bf16 runs at the fp32 rate
    assert peak_flops({"avx512f", "avx512_bf16"}, cores=2, ghz=2.0)["bf16"] == pytest.approx(
        2 * wide["fp32"]
    )
    narrow = peak_flops({"avx2", "fma"}, cores=2, ghz=2.0)
    assert narrow["fp32"] == pytest.approx(wide["fp32"] / 2) and narrow["int8"] == narrow["fp32"]
    assert peak_flops(set(), cores=1, ghz=None) == {"fp32": None, "bf16": None, "int8": None}


def test_cli_prints_the_table_and_writes_json(dataset, tmp_path):
    from click.testing import CliRunner

    from kairox.cli import build_cli

    out = tmp_path / "embed.json"
    result = CliRunner().invoke(
        build_cli(build_plugin_manager(entry_points=False)),
        [
            "bench",
            "embed",
            "--dataset",
            str(dataset),
            "--backends",
            "hashing",
            "--rounds",
            "1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "hashing" in result.output and "docs/s" in result.output
    assert json.loads(out.read_text())["backends"][0]["backend"] == "hashing"
    bad = CliRunner().invoke(
        build_cli(build_plugin_manager(entry_points=False)),
        ["bench", "embed", "--dataset", str(dataset), "--backends", "nope"],
    )
    assert bad.exit_code == 2 and "no embedding backend 'nope'" in bad.output
