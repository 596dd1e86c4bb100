"""all-MiniLM-L6-v2 on OpenVINO: bf16 where the CPU computes in it (the fast ``minilm``).

ONNX Runtime has no bf16 kernels on x86; OpenVINO's CPU plugin has (AVX-512 BF16, AMX).
It compiles the ONNX file exported once by :mod:`kairox_sentence_transformers.onnx_export`
(no torch here) with dynamic shapes, so the length-bucketed batches of
:class:`~kairox_sentence_transformers.onnx_backend.OnnxMiniLMEmbedder` (tokenising,
bucketing and normalising are inherited) run without a recompile per shape. A precision
is a row of :data:`ROWS`: the model file, the compile properties, the suffix of the
vectors' name and the capability the CPU must report; a row is offered only where
OpenVINO's ``OPTIMIZATION_CAPABILITIES`` lists it (checked at run time). Compiled models
are cached under the export's folder in ``$KAIROX_HOME`` (OpenVINO's ``CACHE_DIR``), so
a new process loads the compiled blob instead of compiling again.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kairox import LazyImport
from kairox.support.errors import KairoxError
from kairox.support.paths import private_tree
from kairox_sentence_transformers.model import MODEL_NAME
from kairox_sentence_transformers.onnx_backend import OnnxMiniLMEmbedder, check_batch_size
from kairox_sentence_transformers.onnx_qdq import QDQ_VERSION

__all__ = [
    "OPENVINO_INSTALL_HINT",
    "ROWS",
    "OpenVinoMiniLMEmbedder",
    "OpenVinoRow",
    "UnsupportedPrecisionError",
    "cpu_capabilities",
    "openvino_libraries",
]

OPENVINO_INSTALL_HINT = "pip install 'kairox-sentence-transformers[openvino]'"
#: The folder, next to the exported ONNX files, that holds OpenVINO's compiled models.
CACHE_FOLDER = "openvino-cache"
#: Batch shapes whose prepared kernels OpenVINO keeps (see ``compile_config``).
RUNTIME_CACHE_SHAPES = 64


class UnsupportedPrecisionError(KairoxError, RuntimeError):
    """The CPU does not compute in the precision asked for."""


@dataclass(frozen=True, slots=True)
class OpenVinoRow:
    """One precision OpenVINO runs the model in.

    :param precision: its name (``EmbeddingBackend.precision``).
    :param suffix: added to the model's name to name the vectors: precisions never mix.
    :param export: the ONNX export it compiles (a precision of
        :func:`~kairox_sentence_transformers.onnx_export.ensure_export`, exported on first use).
    :param config: OpenVINO compile properties of this precision.
    :param needs: the ``OPTIMIZATION_CAPABILITIES`` entry the CPU must report, or ``None``.
    """

    precision: str
    suffix: str
    export: str
    config: Mapping[str, Any] = field(default_factory=dict)
    needs: str | None = None


#: The precisions OpenVINO runs, by name. bf16: the fp32 graph with bf16 arithmetic
#: (weights and activations rounded to bf16, accumulation in fp32): cosine >= 0.9999 to
#: fp32 on this plugin's tests, about twice ONNX Runtime fp32's speed on AVX-512 BF16.
ROWS: dict[str, OpenVinoRow] = {
    "bf16": OpenVinoRow(
        precision="bf16",
        suffix="-bf16",
        export="fp32",
        config={"INFERENCE_PRECISION_HINT": "bf16"},
        needs="BF16",
    ),
    # int8: the calibrated QDQ graph (:mod:`kairox_sentence_transformers.onnx_qdq`), its
    # products on VNNI int8 kernels, the rest (attention, norms, GELU, layer 0) in bf16.
    # It runs batches of equal-length texts (kairox_sentence_transformers.int8_backend),
    # so many more input shapes than bf16, and OpenVINO keeps kernels per shape: 300
    # SciFact documents and their sentences took the process to 1,655 MB resident with
    # the default cache, 481 MB with 32 shapes kept (and no slower; none kept: 2x slower).
    "int8": OpenVinoRow(
        precision="int8",
        suffix=f"-int8-qdq{QDQ_VERSION}",
        export="int8-qdq",
        config={"INFERENCE_PRECISION_HINT": "bf16", "CPU_RUNTIME_CACHE_CAPACITY": 32},
        needs="INT8",
    ),
}


def openvino_libraries(backend: str) -> LazyImport:
    # onnxruntime too: the one-time export runs its BERT optimiser.
    return LazyImport(
        "openvino",
        "tokenizers",
        "onnxruntime",
        needed_by=f"the {backend!r} embedding backend (OpenVINO)",
        install=OPENVINO_INSTALL_HINT,
        distributions={
            "openvino": "openvino",
            "tokenizers": "tokenizers",
            "onnxruntime": "onnxruntime",
        },
    )


_core_lock = threading.Lock()
_cores: list[Any] = []


def _core() -> Any:
    # One Core a process: it holds the CPU plugin and its thread pool.
    with _core_lock:
        if not _cores:
            _cores.append(openvino_libraries("minilm").load().Core())
        return _cores[0]


@functools.cache
def cpu_capabilities() -> frozenset[str]:
    """What OpenVINO's CPU plugin computes in here (``BF16``, ``FP32``, ``INT8``...);
    nothing where the plugin cannot start (an unsupported CPU): then minilm runs fp32."""
    try:
        return frozenset(_core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except RuntimeError:
        return frozenset()


def row_supported(row: OpenVinoRow, capabilities: Iterable[str]) -> bool:
    return row.needs is None or row.needs in set(capabilities)


@dataclass(slots=True)
class _Compiled:
    model: Any
    request: Any


class OpenVinoMiniLMEmbedder(OnnxMiniLMEmbedder):
    """An ``EmbeddingBackend``: all-MiniLM-L6-v2 through OpenVINO in ``precision``.

    The vectors are named ``all-MiniLM-L6-v2`` plus the row's suffix
    (``all-MiniLM-L6-v2-bf16``): an index never mixes them with fp32 ones. Construction
    asks ``capabilities()`` (OpenVINO's CPU plugin by default; a parameter so a test can
    stand for another CPU) and raises :class:`UnsupportedPrecisionError` where the CPU
    lacks the row's capability, rather than run it emulated or silently in fp32.
    Thread-safe; loads on the first non-empty ``embed`` like its ONNX Runtime parent.
    """

    required_modules: ClassVar[tuple[str, ...]] = ("openvino", "tokenizers", "onnxruntime")

    def __init__(
        self,
        *,
        precision: str = "bf16",
        batch_size: int = 64,
        max_seq_length: int = 256,
        capabilities: Callable[[], Iterable[str]] = cpu_capabilities,
    ) -> None:
        row = ROWS.get(precision)
        if row is None:
            raise ValueError(f"precision must be one of {tuple(ROWS)}, got {precision!r}")
        check_batch_size(batch_size)
        name = MODEL_NAME + row.suffix
        openvino_libraries(name).check()
        found = sorted(capabilities())
        if not row_supported(row, found):
            raise UnsupportedPrecisionError(
                f"embedding backend {name!r}: this CPU does not compute in {row.needs} "
                f"(OpenVINO reports {', '.join(found) or 'nothing'}); use the fp32 backend "
                '"minilm-fp32" instead'
            )
        self.row = row
        self._setup(precision, name, batch_size, max_seq_length)

    def _export_precision(self) -> str:
        return self.row.export

    def cache_dir(self) -> Path | None:
        """Where compiled models are cached (next to the exported file; ``None`` before
        the first load)."""
        return None if self._model_file is None else self._model_file.parent / CACHE_FOLDER

    def compile_config(self, threads: int) -> dict[str, Any]:
        """The compile properties for ``threads`` threads (the row's on top)."""
        config: dict[str, Any] = {
            "INFERENCE_NUM_THREADS": threads,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            # Unpinned: on a shared machine a thread pinned to a busy core cannot move.
            "ENABLE_CPU_PINNING": False,
            # What the plugin keeps per batch shape, bounded: by default (5,000 shapes) an
            # index run's resident size climbed with every new (texts, width) pair, to
            # 842 MB on this repository; 64 kept it flat (367 MB over 3 passes of 500
            # shapes) at the same CPU time (0 re-prepares every batch: +17 %).
            "CPU_RUNTIME_CACHE_CAPACITY": RUNTIME_CACHE_SHAPES,
        }
        cache = self.cache_dir()
        if cache is not None:
            config["CACHE_DIR"] = str(cache)
        config.update(self.row.config)
        return config

    def _build_session(self, model_file: Path, threads: int) -> _Compiled:
        # The path, not a read model: with CACHE_DIR set, a cached blob is loaded
        # without parsing the ONNX file at all.
        model = _core().compile_model(str(model_file), "CPU", self.compile_config(threads))
        cache = self.cache_dir()
        if cache is not None and cache.is_dir():
            private_tree(cache)  # OpenVINO writes its cached blobs with the umask's mode
        return _Compiled(model=model, request=model.create_infer_request())

    def execution_precision(self) -> str:
        """The precision the compiled model computes in, as OpenVINO reports it."""
        with self._lock:
            compiled = self._session(self._threads())
        return compiled.model.get_property("INFERENCE_PRECISION_HINT").get_type_name()

    def _infer(self, session: _Compiled, feeds: dict[str, np.ndarray]) -> np.ndarray:
        session.request.infer(feeds)
        # The output tensor is the request's own buffer: the caller copies it out.
        return session.request.get_output_tensor(0).data
