from __future__ import annotations

import os
import subprocess

import pytest
from kairox_sentence_transformers import MiniLMEmbedder, OnnxMiniLMEmbedder

from kairox.testing import python_process


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
def run_in_home(kairox_home):
    """Runs code in a fresh interpreter with every plugin and the session's KAIROX_HOME
    (asserted to exit 0): for what only a new process shows, like which modules load."""
    env = {k: v for k, v in os.environ.items() if k != "KAIROX_LOAD_PLUGINS"}
    env["KAIROX_HOME"] = str(kairox_home)

    def run(code: str) -> subprocess.CompletedProcess[str]:
        return python_process(code, env=env, timeout=300)

    return run


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
    from kairox_sentence_transformers.openvino_backend import (
        OpenVinoMiniLMEmbedder,
        cpu_capabilities,
    )

    if "BF16" not in cpu_capabilities():
        # minilm computes in fp32 there; the fallback tests cover that CPU.
        pytest.skip("this CPU has no BF16 (AVX-512 BF16 or AMX)")
    backend = OpenVinoMiniLMEmbedder(precision="bf16")
    backend.load()
    return backend
