"""Which int8 runs ``minilm-int8``: OpenVINO's where it can, onnxruntime's otherwise.

OpenVINO runs the calibrated QDQ model (:mod:`kairox_sentence_transformers.onnx_qdq`) on
its VNNI int8 kernels, the rest in bf16: measured 1.7x onnxruntime's static int8 with the
same agreement to fp32 (benchmarks/README.md, "Embedding speed"). Where OpenVINO is not
installed, or its CPU plugin reports no int8, onnxruntime's static int8 runs as before
and ``kairox plugins`` says how to get the faster one. The two give different vectors,
hence different names: switching re-embeds.
"""

from __future__ import annotations

from kairox_sentence_transformers.onnx_backend import OnnxMiniLMEmbedder


def _openvino_ready() -> tuple[bool, str]:
    """Whether OpenVINO can run the int8 row here, and if not, why."""
    from kairox_sentence_transformers.openvino_backend import (
        OPENVINO_INSTALL_HINT,
        ROWS,
        cpu_capabilities,
        openvino_libraries,
        row_supported,
    )

    if not openvino_libraries("minilm-int8").available():
        return False, (
            "minilm-int8 runs on ONNX Runtime's int8: OpenVINO is not installed; for its "
            f"int8 kernels (about 1.7x faster, vectors of their own name) run "
            f"`{OPENVINO_INSTALL_HINT}`"
        )
    if not row_supported(ROWS["int8"], cpu_capabilities()):
        return (
            False,
            "minilm-int8 runs on ONNX Runtime's int8: OpenVINO reports no int8 on this CPU",
        )
    return True, ""


def openvino_int8() -> OnnxMiniLMEmbedder | None:
    """The OpenVINO int8 embedder, or ``None`` where it cannot run."""
    ready, _ = _openvino_ready()
    if not ready:
        return None
    from kairox_sentence_transformers.openvino_backend import OpenVinoMiniLMEmbedder

    return OpenVinoMiniLMEmbedder(precision="int8")


def int8_notes() -> list[str]:
    """For ``kairox plugins``: why ``minilm-int8`` is not on OpenVINO, if it is not."""
    ready, why = _openvino_ready()
    return [] if ready else [why]
