"""Which int8 runs ``minilm-int8``: OpenVINO's where it can, onnxruntime's otherwise.

OpenVINO runs the calibrated QDQ model (:mod:`kairox_sentence_transformers.onnx_qdq`) on
its VNNI int8 kernels, the rest in bf16: 1.6-2.4x onnxruntime's static int8 with the
same agreement to fp32 (benchmarks/README.md, "Embedding speed"). Where OpenVINO is not
installed, or its CPU plugin reports no int8, onnxruntime's static int8 runs as before
and ``kairox plugins`` says how to get the faster one. The two give different vectors,
hence different names: switching re-embeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kairox_sentence_transformers.onnx_backend import TOKENS_PER_BATCH, OnnxMiniLMEmbedder
from kairox_sentence_transformers.openvino_backend import (
    OPENVINO_INSTALL_HINT,
    ROWS,
    OpenVinoMiniLMEmbedder,
    cpu_capabilities,
    openvino_libraries,
    row_supported,
)


def _openvino_ready() -> tuple[bool, str]:
    """Whether OpenVINO can run the int8 row here, and if not, why."""
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


def equal_length_batches(lengths: Sequence[int], batch_size: int, tokens: int) -> list[np.ndarray]:
    """Indices of texts grouped by equal token count, longest first: each batch holds at
    most ``batch_size`` texts and ``tokens`` tokens (but at least one text), and no
    padding."""
    groups: dict[int, list[int]] = {}
    for index, length in enumerate(lengths):
        groups.setdefault(int(length), []).append(index)
    batches: list[np.ndarray] = []
    for length in sorted(groups, reverse=True):
        members = groups[length]
        size = max(1, min(batch_size, tokens // max(1, length)))
        batches.extend(
            np.asarray(members[start : start + size]) for start in range(0, len(members), size)
        )
    return batches


def openvino_int8() -> OnnxMiniLMEmbedder | None:
    """The OpenVINO int8 embedder, or ``None`` where it cannot run."""
    ready, _ = _openvino_ready()
    if not ready:
        return None

    class OpenVinoInt8Embedder(OpenVinoMiniLMEmbedder):
        # OpenVINO's int8 kernels give a padded text (one shorter than its batch's longest)
        # a vector that can differ from its vector alone (cosine down to 0.991 on SciFact
        # sentences, a few rows in a hundred; fp32 and bf16 do not): batches of texts of
        # one length have no padding, and their vectors equal the texts' alone exactly.
        # Documents run faster so (no padding: 2.30 against 3.23 s for 100 SciFact
        # documents), short sentences slower (more, smaller batches: 4.05 against 3.12 s
        # for 700).
        def _batches(self, lengths: Sequence[int]) -> list[np.ndarray]:
            return equal_length_batches(lengths, self.batch_size, TOKENS_PER_BATCH)

    return OpenVinoInt8Embedder(precision="int8")


def int8_notes() -> list[str]:
    """For ``kairox plugins``: why ``minilm-int8`` is not on OpenVINO, if it is not."""
    ready, why = _openvino_ready()
    return [] if ready else [why]
