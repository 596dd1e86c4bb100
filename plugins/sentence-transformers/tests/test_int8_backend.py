"""``minilm-int8``: OpenVINO's int8 on the QDQ model, onnxruntime's static int8 without it."""

from __future__ import annotations

import json

import kairox_sentence_transformers
import numpy as np
import pytest
from kairox_sentence_transformers import (
    MODEL_NAME,
    OnnxMiniLMEmbedder,
    minilm_int8,
    minilm_int8_ort,
)
from kairox_sentence_transformers.int8_backend import equal_length_batches, int8_notes
from kairox_sentence_transformers.onnx_export import QDQ_FILE, export_folder
from kairox_sentence_transformers.onnx_static import calibration_texts
from kairox_sentence_transformers.openvino_backend import (
    OPENVINO_INSTALL_HINT,
    OpenVinoMiniLMEmbedder,
)

from kairox.testing import CORPUS, EmbeddingConformance

# Held out from calibration.txt: prose of several lengths, a query, code, a log line.
TEXTS = [doc.text for doc in CORPUS] + [
    "what causes the seasons on earth",
    "def retry(fn, attempts=3):\n    for i in range(attempts):\n        try:\n"
    "            return fn()\n        except OSError:\n            continue",
    "2026-12-02T06:12:01Z ERROR upload worker 3: connection reset by peer (attempt 2/5)",
    "Vitamin D deficiency has been associated with an increased risk of respiratory "
    "infections in several cohort studies, although randomised trials of supplementation "
    "report mixed results, possibly because baseline levels differed between the groups. " * 3,
]

# Runs a snippet with openvino impossible to import (as if it were not installed).
NO_OPENVINO = "import sys\nsys.modules['openvino'] = None\n"


@pytest.fixture(scope="module")
def openvino_int8(onnx_fp32):
    backend = minilm_int8()
    backend.load()
    return backend


class TestOpenVinoInt8Conformance(EmbeddingConformance):
    @pytest.fixture
    def embedding_backend(self, openvino_int8):
        return openvino_int8


def test_int8_runs_on_openvino_and_names_its_vectors_apart(openvino_int8, onnx_int8, onnx_fp32):
    assert isinstance(openvino_int8, OpenVinoMiniLMEmbedder)
    assert openvino_int8.precision == "int8"
    assert openvino_int8.name == f"{MODEL_NAME}-int8-qdq1"
    # Other vectors than onnxruntime's int8 and than fp32: an index never mixes them.
    assert len({openvino_int8.name, onnx_int8.name, onnx_fp32.name}) == 3
    # kairox plugins has nothing to say about minilm-int8 (minilm's bf16 note is its own)
    assert int8_notes() == []
    assert not [n for n in kairox_sentence_transformers.kairox_plugin_notes() if "int8" in n]


def test_int8_agrees_with_fp32_on_held_out_texts(openvino_int8, onnx_fp32):
    cosine = np.sum(openvino_int8.embed(TEXTS) * onnx_fp32.embed(TEXTS), axis=1)
    assert cosine.min() >= 0.97
    assert cosine.mean() >= 0.985


def test_a_vector_does_not_depend_on_its_batch_mates(openvino_int8):
    # Sentences of many lengths: batched with padding, OpenVINO's int8 moved some of these
    # (cosine 0.991 to their vectors alone).
    texts = TEXTS + [s for text in calibration_texts() for s in text.split(". ") if s.strip()]
    together = openvino_int8.embed(texts)
    one_by_one = np.vstack([openvino_int8.embed([t]) for t in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


def test_equal_length_batches_hold_one_length_each_and_respect_the_budget():
    lengths = [3, 100, 7, 100, 3, 1, 100, 3]
    batches = equal_length_batches(lengths, batch_size=2, tokens=250)
    flat = [int(i) for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))  # every text once
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for batch in batches:
        assert len({lengths[i] for i in batch}) == 1  # no padding
        assert len(batch) <= 2 and len(batch) * lengths[batch[0]] <= 250
    assert [len(b) for b in equal_length_batches([500, 500], 4, 200)] == [1, 1]


def test_the_qdq_model_has_constant_scales_and_standard_operators(openvino_int8, kairox_home):
    import onnx

    folder = export_folder(kairox_sentence_transformers.bundled_model_path())
    assert openvino_int8._model_file == folder / QDQ_FILE
    assert folder.is_relative_to(kairox_home)
    graph = onnx.load(str(folder / QDQ_FILE)).graph
    ops = {node.op_type for node in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "MatMul"} <= ops
    assert "DynamicQuantizeLinear" not in ops  # scales fixed: no batch dependence
    assert not {node.domain for node in graph.node} - {"", "ai.onnx"}  # OpenVINO reads it
    constants = {init.name for init in graph.initializer}
    quantised = [n for n in graph.node if n.op_type == "QuantizeLinear"]
    assert quantised and all(n.input[1] in constants for n in quantised)
    # Layer 0 stays in floating point: its weights are float, not int8 behind a DQ.
    produced_by_dq = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    layer0 = [n for n in graph.node if n.op_type == "MatMul" and "/layer.0/" in n.name]
    assert layer0 and not any(i in produced_by_dq for n in layer0 for i in n.input)
    layer1 = [n for n in graph.node if n.op_type == "MatMul" and "/layer.1/" in n.name]
    assert any(i in produced_by_dq for n in layer1 for i in n.input)


def test_the_int8_search_path_never_imports_torch(openvino_int8, run_in_home):
    out = run_in_home(
        "import sys\n"
        "from kairox_sentence_transformers import minilm_int8\n"
        "backend = minilm_int8()\n"
        "assert backend.embed(['saturn rings']).shape == (1, 384)\n"
        "print(backend.name, sorted({'torch', 'transformers'} & set(sys.modules)))\n",
    ).stdout
    assert out.strip() == f"{MODEL_NAME}-int8-qdq1 []"


def test_minilm_int8_ort_is_onnxruntimes_whatever_is_installed(onnx_int8):
    backend = minilm_int8_ort()
    assert type(backend) is OnnxMiniLMEmbedder
    assert backend.name == onnx_int8.name == f"{MODEL_NAME}-int8-static1"


def test_without_openvino_int8_falls_back_to_onnxruntime(onnx_int8, run_in_home):
    out = run_in_home(
        NO_OPENVINO + "from kairox_sentence_transformers import minilm_int8\n"
        "backend = minilm_int8()\n"
        "print(type(backend).__name__, backend.name)\n"
        "print(backend.embed(['saturn rings']).tolist())\n",
    ).stdout
    kind_and_name, vector = out.strip().splitlines()
    assert kind_and_name == f"{OnnxMiniLMEmbedder.__name__} {MODEL_NAME}-int8-static1"
    np.testing.assert_allclose(json.loads(vector), onnx_int8.embed(["saturn rings"]), atol=1e-6)


def test_without_openvino_kairox_plugins_says_how_to_get_the_fast_int8(run_in_home):
    out = run_in_home(
        NO_OPENVINO + "sys.argv = ['kairox', 'plugins', '--json']\n"
        "from kairox.cli import main\nmain()\n",
    ).stdout
    entry = {e["name"]: e for e in json.loads(out)}["sentence-transformers"]
    assert entry["status"] == "ok"
    (note,) = [n for n in entry["notes"] if n.startswith("minilm-int8")]  # minilm's too
    assert "ONNX Runtime's int8" in note and OPENVINO_INSTALL_HINT in note
