"""int8 in QDQ form: the graph OpenVINO turns into VNNI int8 kernels (``minilm-int8``).

The static int8 model of :mod:`kairox_sentence_transformers.onnx_static` is built on
onnxruntime's fused operators (``QAttention``, ``QEmbedLayerNormalization``), which only
onnxruntime reads. This one is made from the plain exported graph (before the BERT
optimiser): every projection and feed-forward ``MatMul`` gets its weight as int8 per
output channel behind a ``DequantizeLinear``, and its input behind a
``QuantizeLinear``/``DequantizeLinear`` pair at a constant scale, calibrated (min and max,
zero included) over the texts shipped in ``calibration.txt``, each text alone. OpenVINO
folds each pair into its int8 matrix products; what stays in floating point (attention
scores, softmax, layer norms, GELU) runs at the precision the runtime is told (bf16).

Constant scales: a text's vector never depends on its batch-mates. Not quantised, because
measured on 200 SciFact documents against fp32 they cost agreement for little speed: the
outputs of the products (the feed-forward's output spans +-200: cosine min 0.92 with them),
the two activation-by-activation products of attention, and the first layer's products
(its inputs carry the embedding's outliers: cosine min 0.9883 with them, 0.9913 without).
Runs in the export's child process, once per installation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kairox_sentence_transformers.onnx_static import calibration_texts

#: Bump when the recipe (what is quantised, how it is calibrated) or the calibration texts
#: change: the vectors change with them, and their name carries it.
QDQ_VERSION = 1
#: Layers whose products stay in floating point (node names of the exported graph).
FLOAT_LAYERS = re.compile(r"/encoder/layer\.0/")


def _feeds(tokenizer: Any) -> Iterator[dict[str, np.ndarray]]:
    for encoding in tokenizer.encode_batch(calibration_texts()):
        ids = np.asarray([encoding.ids], dtype=np.int64)
        yield {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids),
        }


def _weight_matmuls(model: Any) -> tuple[list[str], list[str]]:
    """Names of the ``MatMul`` nodes to quantise and of those to leave in float."""
    constants = {init.name for init in model.graph.initializer}
    constants |= {
        out for node in model.graph.node if node.op_type == "Constant" for out in node.output
    }
    quantised: list[str] = []
    kept: list[str] = []
    for node in model.graph.node:
        if node.op_type != "MatMul":
            continue
        has_weight = any(name in constants for name in node.input)
        (quantised if has_weight and not FLOAT_LAYERS.search(node.name) else kept).append(node.name)
    if not quantised:
        raise ValueError("the exported graph has no weight MatMul nodes to quantise")
    return quantised, kept


def prepare(raw: Path, prepared: Path) -> None:
    """Write ``prepared``: ``raw`` folded and shape-inferred, as the quantiser expects (its
    weights in ``<name>.data`` beside it, so the step never holds them twice)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    # The symbolic pass is skipped (it gives up on the attention mask's arithmetic).
    quant_pre_process(
        str(raw),
        str(prepared),
        skip_symbolic_shape=True,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        external_data_location=f"{prepared.name}.data",
    )


def make_qdq(prepared: Path, out: Path, tokenizer_file: Path, max_length: int) -> None:
    """Write ``out``: the exported fp32 graph (``prepared`` by :func:`prepare`) with
    calibrated int8 QDQ products."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(max_length)
    tokenizer.no_padding()

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = _feeds(tokenizer)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._feeds, None)

    quantised, kept = _weight_matmuls(onnx.load(str(prepared), load_external_data=False))
    quantize_static(
        str(prepared),
        str(out),
        Calibration(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_quantize=quantised,
        nodes_to_exclude=kept,
        calibrate_method=CalibrationMethod.MinMax,
        use_external_data_format=True,
        extra_options={
            "WeightSymmetric": True,
            "ActivationSymmetric": False,
            "OpTypesToExcludeOutputQuantization": ["MatMul"],
        },
    )
    if not out.is_file() or os.path.getsize(out) == 0:
        raise RuntimeError(f"quantising {prepared} wrote no model to {out}")
