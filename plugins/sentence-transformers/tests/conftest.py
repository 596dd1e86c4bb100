from __future__ import annotations

import os

import pytest
from kairox_sentence_transformers import MiniLMEmbedder, OnnxMiniLMEmbedder


@pytest.fixture(scope="session", autouse=True)
def kairox_home(tmp_path_factory):
    """A private KAIROX_HOME for the session: the ONNX export lands there (once)."""
    home = tmp_path_factory.mktemp("kairox-home")
    saved = os.environ.get("KAIROX_HOME")
    os.environ["KAIROX_HOME"] = str(home)
    yield home
    if saved is None:
        os.environ.pop("KAIROX_HOME", None)
    else:
        os.environ["KAIROX_HOME"] = saved


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """One loaded all-MiniLM-L6-v2 for the whole session (loading takes seconds)."""
    backend = MiniLMEmbedder()
    backend.load()
    return backend


@pytest.fixture(scope="session")
def onnx_fp32(kairox_home) -> OnnxMiniLMEmbedder:
    """The ONNX Runtime fp32 backend, loaded (the first load exports the model)."""
    backend = OnnxMiniLMEmbedder(precision="fp32")
    backend.load()
    return backend


@pytest.fixture(scope="session")
def onnx_int8(onnx_fp32) -> OnnxMiniLMEmbedder:
    backend = OnnxMiniLMEmbedder(precision="int8")
    backend.load()
    return backend


@pytest.fixture(scope="session")
def ov_bf16(onnx_fp32):
    """The OpenVINO bf16 backend, loaded (after onnx_fp32, which made the export)."""
    from kairox_sentence_transformers.openvino_backend import OpenVinoMiniLMEmbedder

    backend = OpenVinoMiniLMEmbedder(precision="bf16")
    backend.load()
    return backend
