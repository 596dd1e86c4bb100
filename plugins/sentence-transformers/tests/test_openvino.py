"""The OpenVINO bf16 backend (``minilm``'s fastest path) and the fallbacks around it."""

from __future__ import annotations

import json

import kairox_sentence_transformers
import numpy as np
import pytest
from kairox_sentence_transformers import (
    MODEL_NAME,
    OnnxMiniLMEmbedder,
    default_minilm,
    fastest_faithful,
    minilm_fp32,
)
from kairox_sentence_transformers.onnx_static import calibration_texts
from kairox_sentence_transformers.openvino_backend import (
    OPENVINO_INSTALL_HINT,
    OpenVinoMiniLMEmbedder,
    UnsupportedPrecisionError,
    cpu_capabilities,
)

from kairox import LazyImport
from kairox.retrieval import FAN_OUT
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.testing import CORPUS, EmbeddingConformance

# Real texts of every kind the plugin ships or tests with: prose, questions, code, logs.
TEXTS = [doc.text for doc in CORPUS] + calibration_texts() + ["", "x"]
NO_BF16 = frozenset({"FP32", "INT8"})
# Runs a snippet with openvino impossible to import (as if it were not installed).
NO_OPENVINO = "import sys\nsys.modules['openvino'] = None\n"


def missing_openvino() -> LazyImport:
    """Libraries that fail to import, the way a missing openvino does."""
    return LazyImport(
        "kairox_test_openvino_is_not_installed",
        needed_by="the 'minilm' embedding backend (OpenVINO)",
        install=OPENVINO_INSTALL_HINT,
    )


class TestOpenVinoConformance(EmbeddingConformance):
    @pytest.fixture
    def embedding_backend(self, ov_bf16):
        return ov_bf16


def test_a_cpu_with_bf16_computes_in_bf16(ov_bf16):
    # The rest of this file's bf16 figures mean something only if OpenVINO really
    # computes in bf16 (ov_bf16 skips on a CPU without BF16; NO_BF16 tests cover that).
    assert "BF16" in cpu_capabilities()
    assert ov_bf16.execution_precision() == "bf16"


def test_bf16_agrees_with_fp32_but_is_named_apart(ov_bf16, onnx_fp32):
    ours, fp32 = ov_bf16.embed(TEXTS), onnx_fp32.embed(TEXTS)
    assert ours.shape == fp32.shape == (len(TEXTS), 384)
    cosine = np.sum(ours * fp32, axis=1)
    assert cosine.min() >= 0.999
    assert not np.array_equal(ours, fp32)  # bf16 arithmetic, not fp32 under another name
    assert ov_bf16.name == f"{MODEL_NAME}-bf16" != onnx_fp32.name  # never mixed
    assert ov_bf16.precision == "bf16"


def test_order_is_kept_whatever_the_length_buckets(ov_bf16):
    texts = TEXTS * 2
    together = ov_bf16.embed(texts)
    one_by_one = np.vstack([ov_bf16.embed([t]) for t in texts])
    assert np.sum(together * one_by_one, axis=1).min() >= 0.9995


def test_one_compiled_model_serves_every_batch_shape(ov_bf16):
    ov_bf16.embed(TEXTS)  # batches of many widths and sizes
    assert set(ov_bf16._sessions) == {ov_bf16._threads()}  # compiled once
    (compiled,) = ov_bf16._sessions.values()
    for port in compiled.model.inputs:
        shape = port.get_partial_shape()
        assert shape.rank.get_length() == 2 and shape[0].is_dynamic and shape[1].is_dynamic


def test_the_compiled_model_is_cached_in_kairox_home(ov_bf16, kairox_home):
    cache = ov_bf16.cache_dir()
    assert cache is not None and cache.is_relative_to(kairox_home)
    blobs = sorted(p.name for p in cache.iterdir())
    assert blobs, "nothing cached"
    again = OpenVinoMiniLMEmbedder(precision="bf16")
    again.load()
    assert sorted(p.name for p in cache.iterdir()) == blobs  # loaded, not compiled anew
    assert again.compile_config(1)["CACHE_DIR"] == str(cache)


def test_threads_follow_fan_out(ov_bf16):
    token = FAN_OUT.set(3)  # what the composite sets while it asks three sources
    try:
        assert ov_bf16._threads() == 1
        ov_bf16.embed(["saturn rings"])
        compiled = ov_bf16._sessions[1]
        assert int(compiled.model.get_property("INFERENCE_NUM_THREADS")) == 1
    finally:
        FAN_OUT.reset(token)
    assert ov_bf16.compile_config(2)["INFERENCE_NUM_THREADS"] == 2
    assert ov_bf16.compile_config(2)["ENABLE_CPU_PINNING"] is False


def test_what_is_kept_per_batch_shape_is_bounded(ov_bf16):
    # Every new (texts, width) pair would otherwise add to the resident size for good.
    # (A compile-time key only: the compiled model does not report it back.)
    assert ov_bf16.compile_config(2)["CPU_RUNTIME_CACHE_CAPACITY"] == 64


def test_minilm_is_bf16_where_the_cpu_has_it():
    backend = default_minilm(capabilities=lambda: {"BF16", "FP32"})
    assert isinstance(backend, OpenVinoMiniLMEmbedder) and isinstance(backend, EmbeddingBackend)
    assert (backend.name, backend.precision) == (f"{MODEL_NAME}-bf16", "bf16")
    assert fastest_faithful(capabilities=lambda: {"BF16"}) == ("openvino-bf16", None)


def test_a_cpu_without_bf16_gets_fp32_vectors_named_fp32():
    backend = default_minilm(capabilities=lambda: NO_BF16)
    assert type(backend) is OnnxMiniLMEmbedder
    assert (backend.name, backend.precision) == (MODEL_NAME, "fp32")
    runtime, why = fastest_faithful(capabilities=lambda: NO_BF16)
    assert runtime == "onnx-fp32"
    assert "BF16" in why and "FP32, INT8" in why


def test_bf16_refuses_a_cpu_without_bf16():
    with pytest.raises(UnsupportedPrecisionError, match="minilm-fp32"):
        OpenVinoMiniLMEmbedder(precision="bf16", capabilities=lambda: NO_BF16)


def test_rejects_a_precision_openvino_has_no_row_for():
    with pytest.raises(ValueError, match="precision"):
        OpenVinoMiniLMEmbedder(precision="fp8")


def test_without_openvino_minilm_runs_onnx_fp32_with_an_install_hint():
    backend = default_minilm(openvino=missing_openvino())
    assert type(backend) is OnnxMiniLMEmbedder and backend.name == MODEL_NAME
    runtime, why = fastest_faithful(openvino=missing_openvino())
    assert runtime == "onnx-fp32"
    assert OPENVINO_INSTALL_HINT in why


def test_minilm_fp32_pins_fp32_whatever_the_cpu():
    backend = minilm_fp32()
    assert type(backend) is OnnxMiniLMEmbedder
    assert (backend.name, backend.precision) == (MODEL_NAME, "fp32")


def test_without_openvino_kairox_plugins_shows_the_install_hint(run_in_home):
    result = run_in_home(
        NO_OPENVINO + "from kairox_sentence_transformers import default_minilm\n"
        "print(type(default_minilm()).__name__)\n"
        "sys.argv = ['kairox', 'plugins', '--json']\n"
        "from kairox.cli import main\nmain()\n",
    )
    kind, listing = result.stdout.split("\n", 1)
    assert kind == OnnxMiniLMEmbedder.__name__
    entry = {e["name"]: e for e in json.loads(listing)}["sentence-transformers"]
    assert entry["status"] == "ok"
    note, int8_note = entry["notes"]  # minilm's, then minilm-int8's
    assert "ONNX Runtime fp32" in note and OPENVINO_INSTALL_HINT in note
    assert int8_note.startswith("minilm-int8")


def test_with_openvino_kairox_plugins_notes_only_what_this_cpu_lacks():
    notes = kairox_sentence_transformers.kairox_plugin_notes()
    if "BF16" in cpu_capabilities():
        assert notes == []
    else:
        # one note, minilm's: fp32 here and which precisions the CPU does have
        (note,) = notes
        assert note.startswith("minilm runs on ONNX Runtime fp32") and "BF16" in note
        assert ", ".join(sorted(cpu_capabilities())) in note
