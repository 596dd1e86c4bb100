"""The ONNX Runtime backends (``minilm``'s fast path, ``minilm-int8``) and their fallback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import kairox_sentence_transformers
import numpy as np
import pytest
from kairox_sentence_transformers import (
    MODEL_NAME,
    MiniLMEmbedder,
    OnnxMiniLMEmbedder,
    default_minilm,
    minilm_int8,
)
from kairox_sentence_transformers.onnx_backend import length_batches
from kairox_sentence_transformers.onnx_export import FP32_FILE, INT8_FILE, export_folder
from kairox_sentence_transformers.onnx_static import calibration_texts

from kairox.retrieval.embedding import EmbeddingBackend
from kairox.testing import CORPUS, EmbeddingConformance

TEXTS = [doc.text for doc in CORPUS] + ["", "x", "a cat sits on the mat " * 80]

# Runs a snippet with onnxruntime impossible to import (as if it were not installed).
NO_ONNX = "import sys\nsys.modules['onnxruntime'] = None\n"


class TestOnnxConformance(EmbeddingConformance):
    @pytest.fixture
    def embedding_backend(self, onnx_fp32):
        return onnx_fp32


class TestOnnxInt8Conformance(EmbeddingConformance):
    @pytest.fixture
    def embedding_backend(self, onnx_int8):
        return onnx_int8


def test_fp32_agrees_with_sentence_transformers(onnx_fp32, minilm):
    ours, theirs = onnx_fp32.embed(TEXTS), minilm.embed(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert np.sum(ours * theirs, axis=1).min() >= 0.9999


def test_int8_is_close_but_named_apart(onnx_int8, onnx_fp32):
    cosine = np.sum(onnx_int8.embed(TEXTS) * onnx_fp32.embed(TEXTS), axis=1)
    assert cosine.min() >= 0.97
    assert onnx_fp32.name == MODEL_NAME
    assert onnx_int8.name == f"{MODEL_NAME}-int8-static1" != onnx_fp32.name  # never mixed
    assert (onnx_fp32.precision, onnx_int8.precision) == ("fp32", "int8")


def test_int8_batches_with_fixed_activation_scales(onnx_int8, kairox_home):
    import onnx

    folder = export_folder(kairox_sentence_transformers.bundled_model_path())
    graph = onnx.load(str(folder / INT8_FILE)).graph
    ops = {node.op_type for node in graph.node}
    # No scale computed at run time: nothing depends on what else is in the batch.
    assert "DynamicQuantizeLinear" not in ops
    assert {"QuantizeLinear", "QAttention", "MatMulIntegerToFloat"} <= ops
    assert "MatMulInteger" not in ops  # fused with its rescaling
    # A short text next to long ones gets the vector it gets alone.
    texts = TEXTS * 2
    together = onnx_int8.embed(texts)
    one_by_one = np.vstack([onnx_int8.embed([t]) for t in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


def test_calibration_texts_are_shipped_and_varied():
    texts = calibration_texts()
    assert len(texts) >= 40
    assert len(set(texts)) == len(texts)
    assert max(len(t.split()) for t in texts) > 100  # some reach the 256-token limit
    assert min(len(t.split()) for t in texts) <= 4  # and some are queries


def test_order_is_kept_whatever_the_length_buckets(onnx_fp32):
    texts = TEXTS * 3
    together = onnx_fp32.embed(texts)
    one_by_one = np.vstack([onnx_fp32.embed([t]) for t in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-4)


def test_length_batches_sort_longest_first_and_respect_the_token_budget():
    lengths = [3, 100, 7, 100, 50, 1]
    batches = length_batches(lengths, batch_size=4, tokens=200)
    flat = [int(i) for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))  # every text once
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for batch in batches:
        assert len(batch) <= 4
        assert len(batch) * max(lengths[i] for i in batch) <= 200
    assert length_batches([500], batch_size=4, tokens=200)[0].tolist() == [0]  # still one


def test_the_export_is_made_once_into_kairox_home(onnx_fp32, kairox_home):
    folder = export_folder(kairox_sentence_transformers.bundled_model_path())
    assert folder.is_relative_to(kairox_home)
    assert (folder / FP32_FILE).is_file() and (folder / INT8_FILE).is_file()
    # Kairox's state is owner-only whatever the umask: the models folder and the export too
    for path in [folder.parent, folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        # OpenVINO writes its cache blobs read-only (0400): owner-only all the same
        assert mode == 0o700 if path.is_dir() else mode & 0o077 == 0, (path, oct(mode))
    stamp = (folder / FP32_FILE).stat().st_mtime_ns
    OnnxMiniLMEmbedder().load()
    assert (folder / FP32_FILE).stat().st_mtime_ns == stamp


def test_the_loading_note_names_the_one_time_export_while_there_is_none(
    onnx_fp32, tmp_path, monkeypatch
):
    # Shown by `kairox index` as its own step (tests/cli/test_progress_lines.py).
    assert OnnxMiniLMEmbedder().loading_note == "loading the model"  # exported already
    monkeypatch.setenv("KAIROX_HOME", str(tmp_path / "fresh"))
    assert OnnxMiniLMEmbedder().loading_note == "preparing the model (one-time export)"


def test_rejects_an_unknown_precision():
    with pytest.raises(ValueError, match="precision"):
        OnnxMiniLMEmbedder(precision="bf16")


def test_minilm_defaults_to_onnx_when_installed():
    # No BF16 here (as OpenVINO would report it): minilm is ONNX Runtime fp32.
    backend = default_minilm(capabilities=lambda: {"FP32"})
    assert type(backend) is OnnxMiniLMEmbedder and isinstance(backend, EmbeddingBackend)
    assert backend.precision == "fp32"


def test_loading_and_embedding_on_onnx_never_import_torch(onnx_fp32, run_in_home):
    result = run_in_home(
        "import sys\n"
        "from kairox_sentence_transformers import default_minilm\n"
        "vectors = default_minilm().embed(['saturn rings'])\n"
        "assert vectors.shape == (1, 384)\n"
        "print(sorted({'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)))\n",
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_without_onnxruntime_minilm_falls_back_to_sentence_transformers(run_in_home):
    result = run_in_home(
        NO_ONNX + "from kairox_sentence_transformers import default_minilm\n"
        "print(type(default_minilm()).__name__)\n",
    )
    assert result.stdout.strip() == MiniLMEmbedder.__name__


def test_without_onnxruntime_int8_asks_for_the_extra(run_in_home):
    result = run_in_home(
        NO_ONNX + "from kairox_sentence_transformers import minilm_int8\n"
        "try:\n    minilm_int8()\nexcept ImportError as exc:\n    print(exc)\n",
    )
    assert "pip install 'kairox-sentence-transformers[onnx]'" in result.stdout
    assert callable(minilm_int8)


def test_without_onnxruntime_kairox_plugins_shows_the_install_hint(run_in_home):
    result = run_in_home(
        NO_ONNX + "sys.argv = ['kairox', 'plugins', '--json']\n"
        "from kairox.cli import main\nmain()\n",
    )
    listed = {entry["name"]: entry for entry in json.loads(result.stdout)}
    entry = listed["sentence-transformers"]
    assert entry["status"] == "ok"
    (note,) = entry["notes"]
    assert "sentence-transformers" in note
    assert "pip install 'kairox-sentence-transformers[onnx]'" in note


@pytest.mark.timeout(900)  # a fresh export: half a minute alone, minutes on a busy machine
def test_the_export_never_imports_files_from_the_users_folder(tmp_path):
    # A workspace with a secrets.py: python -m would put it ahead of the standard library.
    folder = tmp_path / "project"
    folder.mkdir()
    marker = tmp_path / "user-code-ran"
    (folder / "secrets.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise ImportError('the user file was imported')\n"
    )
    home = tmp_path / "home"
    script = (
        "import resource\n"
        "from kairox_sentence_transformers import bundled_model_path\n"
        "from kairox_sentence_transformers.onnx_export import ensure_export\n"
        "print(ensure_export(bundled_model_path(), 'fp32'))\n"
        # The largest peak of the export's processes (each step's, in KB), counted here:
        # a forked child's peak includes its parent's size at the fork (pytest's, torch
        # loaded), not what the child itself held.
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    result = subprocess.run(
        [sys.executable, "-P", "-c", script],
        cwd=folder,
        env={**os.environ, "KAIROX_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    exported, peak = result.stdout.split()
    assert exported.endswith(FP32_FILE)
    assert "preparing all-MiniLM-L6-v2 for ONNX Runtime" in result.stderr
    assert "a one-time step" in result.stderr
    # Each step of the export in a process of its own: 594 MB at the most here (the torch
    # trace), where the export in one process peaked at 1.35 GB.
    assert int(peak) < 800 * 1024, f"{int(peak) // 1024} MB"
