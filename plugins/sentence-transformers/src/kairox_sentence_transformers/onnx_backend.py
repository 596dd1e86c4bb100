"""all-MiniLM-L6-v2 on ONNX Runtime: the fast ``minilm`` path, and ``minilm-int8``.

No torch here: ``tokenizers`` splits the texts (in one batch call), onnxruntime runs the
graph exported once by :mod:`kairox_sentence_transformers.onnx_export` (mean pooling
included), numpy normalises. Texts are sorted by token count and cut into batches of
similar length, so little time goes into padding (int8 too: its activation scales are
calibrated constants, :mod:`kairox_sentence_transformers.onnx_static`, so a vector does not
depend on its batch-mates). The thread count follows
:data:`kairox.retrieval.FAN_OUT`: all the process's cores alone, one next to other
sources (a session per thread count, built on first use).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kairox import LazyImport, return_freed_memory
from kairox.retrieval import FAN_OUT
from kairox_sentence_transformers.inputs import texts_to_embed
from kairox_sentence_transformers.model import MODEL_DIM, MODEL_NAME, bundled_model_path
from kairox_sentence_transformers.onnx_export import ensure_export, is_exported
from kairox_sentence_transformers.onnx_static import CALIBRATION_VERSION

PRECISIONS = ("fp32", "int8")
#: What each precision adds to the vector name: an index never mixes two of them. The int8
#: vectors are those of the calibrated (static) quantisation; its calibration version is
#: part of the name, since new calibration texts give other vectors.
NAME_SUFFIX = {"fp32": "", "int8": f"-int8-static{CALIBRATION_VERSION}"}
#: Tokens a batch may hold (texts x padded length): bounds the activations' memory
#: (1,024: about 100 MB above the loaded model; 2,048 doubled that at the same speed).
TOKENS_PER_BATCH = 1024
ONNX_INSTALL_HINT = "pip install 'kairox-sentence-transformers[onnx]'"


def onnx_libraries(backend: str) -> LazyImport:
    return LazyImport(
        "onnxruntime",
        "tokenizers",
        needed_by=f"the {backend!r} embedding backend (ONNX Runtime)",
        install=ONNX_INSTALL_HINT,
        distributions={"onnxruntime": "onnxruntime", "tokenizers": "tokenizers"},
    )


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def length_batches(lengths: Sequence[int], batch_size: int, tokens: int) -> list[np.ndarray]:
    """Indices of texts grouped by similar token count, longest first: each batch holds
    at most ``batch_size`` texts and ``tokens`` padded tokens (but at least one text)."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        longest = max(1, int(lengths[order[start]]))
        size = max(1, min(batch_size, tokens // longest))
        batches.append(order[start : start + size])
        start += size
    return batches


def check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


class OnnxMiniLMEmbedder:
    """An ``EmbeddingBackend``: all-MiniLM-L6-v2 through ONNX Runtime.

    ``precision`` is part of the identity: ``fp32`` vectors are named
    ``all-MiniLM-L6-v2`` (they agree with sentence-transformers' to cosine >= 0.9999, so
    an index built by either serves both), ``int8`` ones ``all-MiniLM-L6-v2-int8-static1``,
    so an index never mixes the two (switching re-embeds). Thread-safe; the model loads on the
    first non-empty ``embed`` (or ``load()``), exporting the ONNX files first if this
    installation has none yet (a child process, the only time torch is needed).
    """

    required_modules: ClassVar[tuple[str, ...]] = ("onnxruntime", "tokenizers")

    def __init__(
        self, *, precision: str = "fp32", batch_size: int = 64, max_seq_length: int = 256
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        check_batch_size(batch_size)
        onnx_libraries(MODEL_NAME + NAME_SUFFIX[precision]).check()
        self._setup(precision, MODEL_NAME + NAME_SUFFIX[precision], batch_size, max_seq_length)

    def _setup(self, precision: str, name: str, batch_size: int, max_seq_length: int) -> None:
        self.precision = precision
        self.name = name
        self.dim = MODEL_DIM
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._sessions: dict[int, Any] = {}
        self._model_file: Path | None = None

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        kind = type(self).__name__
        return f"{kind}(name={self.name!r}, precision={self.precision!r}, {state})"

    @property
    def loaded(self) -> bool:
        return bool(self._sessions)

    def load(self) -> None:
        """Load the tokenizer and the model now (idempotent)."""
        with self._lock:
            self._session(self._threads())

    def release(self) -> None:
        """Drop the compiled model from memory (the tokenizer and the exported file
        stay); the next ``embed`` compiles it again, from the cache where there is one."""
        with self._lock:
            self._sessions.clear()

    def _threads(self) -> int:
        # Next to other sources one thread: a parallel section waits for a core another
        # source holds (the same measurement as the sentence-transformers backend's).
        return 1 if FAN_OUT.get() > 1 else available_cores()

    def _session(self, threads: int) -> Any:
        # Caller holds self._lock.
        session = self._sessions.get(threads)
        if session is not None:
            return session
        model_path = bundled_model_path()
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
            tokenizer.enable_truncation(self.max_seq_length)
            tokenizer.no_padding()
            self._tokenizer = tokenizer
        if self._model_file is None:
            self._model_file = self._export(model_path)
        session = self._build_session(self._model_file, threads)
        self._sessions[threads] = session
        return session

    def _export_precision(self) -> str:
        """Which export of :func:`~kairox_sentence_transformers.onnx_export.ensure_export`
        this backend runs."""
        return self.precision

    def _export(self, model_path: Path) -> Path:
        """The model file this backend runs (exported on first use)."""
        return ensure_export(model_path, self._export_precision())

    @property
    def loading_note(self) -> str:
        """What loading the model involves now, for progress lines: the one-time export
        (20-35 s) while this installation has none yet."""
        if self._model_file is None and not is_exported(
            bundled_model_path(), self._export_precision()
        ):
            return "preparing the model (one-time export)"
        return "loading the model"

    def _build_session(self, model_file: Path, threads: int) -> Any:
        """An inference session over ``model_file`` on ``threads`` threads."""
        onnxruntime = onnx_libraries(self.name).load()
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # No spinning: an idle pool thread that spins holds a core the other thread (or
        # another process) needs. On the shared 2-core host, 48 SciFact documents in 5
        # interleaved rounds: fp32 14.3 s against 16.9 s, int8 8.5 s against 12.1 s
        # (medians; faster in every round).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # No arena: it keeps the largest batch's activations for the life of the process
        # (an index run's peak memory); batches of similar size re-allocate cheaply.
        options.enable_cpu_mem_arena = False
        return onnxruntime.InferenceSession(
            str(model_file), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def _infer(self, session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The pooled (unnormalised) vectors of one batch."""
        (pooled,) = session.run(None, feeds)
        return pooled

    def _batches(self, lengths: Sequence[int]) -> list[np.ndarray]:
        """The texts' indices cut into the batches ``embed`` runs."""
        return length_batches(lengths, self.batch_size, TOKENS_PER_BATCH)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Word-piece tokens of each text as the model reads it (after truncation)."""
        with self._lock:
            self._session(self._threads())
            return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit ``float32`` rows, ``(len(texts), dim)``, in the order of ``texts``."""
        items = texts_to_embed(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        with self._lock:
            session = self._session(self._threads())
            encodings = self._tokenizer.encode_batch(items)
            lengths = [len(e.ids) for e in encodings]
            for rows in self._batches(lengths):
                width = max(lengths[r] for r in rows)
                ids = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros((len(rows), width), dtype=np.int64)
                for slot, row in enumerate(rows):
                    n = lengths[row]
                    ids[slot, :n] = encodings[row].ids
                    mask[slot, :n] = 1
                feeds = {
                    "input_ids": ids,
                    "attention_mask": mask,
                    "token_type_ids": np.zeros_like(ids),
                }
                out[rows] = self._infer(session, feeds)
                # A large run's activations go back to the allocator, which would keep
                # them: an index run's resident size would climb run after run. A query's
                # run frees too little to be worth the trim (~70 us against ~4 ms).
                if ids.size >= TOKENS_PER_BATCH // 4:
                    return_freed_memory()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
