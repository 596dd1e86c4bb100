"""Static int8: fixed activation scales, so a batched vector never depends on its batch-mates.

onnxruntime's dynamic quantisation computes each activation's int8 scale from the tensor
at run time (``DynamicQuantizeLinear``), over the whole batch: a text's vector then
depends on the texts it is batched with. Here the dynamically quantised graph (int8
weights, per channel) is run once over calibration texts shipped with this package
(``calibration.txt``: prose, questions, code, logs, a few languages; never downloaded),
each text alone; the range every quantised activation takes over them (min and max,
zero included) becomes a constant scale and zero point, and each ``DynamicQuantizeLinear``
becomes a ``QuantizeLinear`` with those constants. The integer products and their
rescaling (``MatMulInteger`` -> ``Cast`` -> ``Mul``) are then fused into one
``MatMulIntegerToFloat`` each, which onnxruntime does not do by itself once the scales are
constants. Runs in the export's child process, once per installation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

#: Bump when the calibration texts or the recipe change: the vectors change with them.
CALIBRATION_VERSION = 1


def calibration_texts() -> list[str]:
    """The shipped calibration texts: paragraphs of ``calibration.txt``."""
    text = resources.files(__package__).joinpath("calibration.txt").read_text("utf-8")
    return [part.strip() for part in text.split("\n\n") if part.strip()]


def _feeds(tokenizer: Any, texts: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
    for encoding in tokenizer.encode_batch(list(texts)):
        ids = np.asarray([encoding.ids], dtype=np.int64)
        yield {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids),
        }


def activation_ranges(model: Any, tokenizer: Any, texts: Sequence[str]) -> dict[str, tuple]:
    """(min, max) of every dynamically quantised activation over ``texts``, zero included."""
    import onnx
    import onnxruntime

    names = [n.input[0] for n in model.graph.node if n.op_type == "DynamicQuantizeLinear"]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in names:
        probe.graph.output.append(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        )
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        probe.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    low = dict.fromkeys(names, 0.0)
    high = dict.fromkeys(names, 0.0)
    for feeds in _feeds(tokenizer, texts):
        for name, value in zip(names, session.run(names, feeds), strict=True):
            low[name] = min(low[name], float(value.min()))
            high[name] = max(high[name], float(value.max()))
    return {name: (low[name], high[name]) for name in names}


def _fix_scales(model: Any, ranges: dict[str, tuple]) -> None:
    # uint8 with a zero point, as DynamicQuantizeLinear itself produces: the consumers
    # (QAttention, MatMulInteger) stay as they are.
    from onnx import helper, numpy_helper

    nodes = []
    for node in model.graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        low, high = ranges[node.input[0]]
        scale = (high - low) / 255.0 or 1.0
        zero_point = int(np.clip(round(-low / scale), 0, 255))
        quantised, scale_name, zero_name = node.output
        model.graph.initializer.append(
            numpy_helper.from_array(np.asarray(scale, dtype=np.float32), scale_name)
        )
        model.graph.initializer.append(
            numpy_helper.from_array(np.asarray(zero_point, dtype=np.uint8), zero_name)
        )
        nodes.append(
            helper.make_node(
                "QuantizeLinear",
                [node.input[0], scale_name, zero_name],
                [quantised],
                name=f"{node.name}_static",
            )
        )
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def _fuse_integer_matmuls(model: Any) -> None:
    # MatMulInteger -> Cast(float) -> Mul(a_scale * b_scale) becomes MatMulIntegerToFloat.
    from onnx import helper

    nodes = list(model.graph.node)
    producer = {out: node for node in nodes for out in node.output}
    consumers: dict[str, list] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for node in nodes:
        if node.op_type != "MatMulInteger":
            continue
        after = consumers.get(node.output[0], [])
        if len(after) != 1 or after[0].op_type != "Cast":
            continue
        cast = after[0]
        after = consumers.get(cast.output[0], [])
        if len(after) != 1 or after[0].op_type != "Mul":
            continue
        mul = after[0]
        scales = producer.get(mul.input[1] if mul.input[0] == cast.output[0] else mul.input[0])
        if scales is None or scales.op_type != "Mul":
            continue
        a_scale, b_scale = scales.input
        replaced[id(node)] = helper.make_node(
            "MatMulIntegerToFloat",
            [node.input[0], node.input[1], a_scale, b_scale, node.input[2], node.input[3]],
            [mul.output[0]],
            name=f"{node.name}_to_float",
            domain="com.microsoft",
        )
        dropped |= {id(cast), id(mul)}
        if len(consumers[scales.output[0]]) == 1:
            dropped.add(id(scales))
    kept = [replaced.get(id(n), n) for n in nodes if id(n) not in dropped]
    del model.graph.node[:]
    model.graph.node.extend(kept)


def make_static(dynamic: Path, out: Path, tokenizer_file: Path, max_length: int) -> None:
    """Write ``out``: ``dynamic`` (a dynamically quantised graph) with calibrated scales."""
    import onnx
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(max_length)
    tokenizer.no_padding()
    model = onnx.load(str(dynamic))
    ranges = activation_ranges(model, tokenizer, calibration_texts())
    _fix_scales(model, ranges)
    _fuse_integer_matmuls(model)
    onnx.save(model, str(out))
