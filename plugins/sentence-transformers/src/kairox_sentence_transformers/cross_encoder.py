"""The ``cross-encoder`` reranker: sentence-transformers' ``CrossEncoder`` scores each
(query, passage) pair and the fused candidates are reordered by that score.

The model is a folder on disk (``cross_encoder = "/path/to/model"``, relative paths from the
workspace's current folder) or an installed package that carries one
(``cross_encoder = "package:some_model_package"``: the folder of that package). Nothing is
downloaded: the model loads with ``local_files_only``. ``torch`` is imported when the
reranker first scores, not when Kairox starts.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from kairox import (
    FusedHit,
    LazyImport,
    PluginSettings,
    Query,
    RerankerSpec,
    StageContext,
    registers,
)

__all__ = ["CrossEncoderReranker", "CrossEncoderSettings", "resolve_model_path"]

SentenceTransformers = LazyImport(
    "sentence_transformers",
    needed_by="the cross-encoder reranker",
    install="pip install kairox-sentence-transformers",
    distributions={"sentence_transformers": "sentence-transformers"},
)


class CrossEncoderSettings(PluginSettings):
    """``cross-encoder``'s keys in ``[profiles.<name>]``."""

    cross_encoder: str = Field(
        default="",
        description="a model folder, or package:NAME for a model shipped in a package",
    )
    # Each passage is cut to this many characters before scoring (the model truncates
    # tokens anyway; this bounds the tokenizer's work).
    cross_encoder_max_chars: int = Field(default=2000, ge=50, le=100_000)


def resolve_model_path(spec: str) -> Path:
    """The folder ``spec`` names; :class:`ValueError` saying what to set when there is none."""
    if not spec:
        raise ValueError(
            'no cross-encoder model is configured: set cross_encoder = "/path/to/model" '
            '(a folder with config.json) or "package:NAME" in the profile'
        )
    if spec.startswith("package:"):
        name = spec.removeprefix("package:")
        found = importlib.util.find_spec(name)
        if found is None or not found.submodule_search_locations:
            raise ValueError(f"no installed package {name!r} carries a cross-encoder model")
        path = Path(next(iter(found.submodule_search_locations)))
    else:
        path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise ValueError(f"{str(path)!r} is not a model folder (it has no config.json)")
    return path


class CrossEncoderReranker:
    """Reorders candidates by a cross-encoder's score for (query, passage), best first."""

    name = "cross-encoder"

    def __init__(self, model_path: Path, max_chars: int = 2000) -> None:
        self.model_path = model_path
        self.max_chars = max_chars
        self._model: Any = None
        self._lock = threading.Lock()

    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                module = SentenceTransformers.load()
                self._model = module.CrossEncoder(
                    str(self.model_path), device="cpu", local_files_only=True
                )
            return self._model

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        pairs = [(query, text[: self.max_chars]) for text in texts]
        return [float(s) for s in self.model().predict(pairs, show_progress_bar=False)]

    def rerank(self, query: Query, hits: Sequence[FusedHit]) -> list[FusedHit]:
        scores = self.scores(query.text, [hit.text for hit in hits])
        order = sorted(range(len(hits)), key=lambda i: -scores[i])
        return [hits[i] for i in order]


def _build(ctx: StageContext) -> CrossEncoderReranker:
    settings = ctx.settings if isinstance(ctx.settings, CrossEncoderSettings) else None
    settings = settings or CrossEncoderSettings()
    return CrossEncoderReranker(
        resolve_model_path(settings.cross_encoder), settings.cross_encoder_max_chars
    )


kairox_register_rerankers = registers(
    RerankerSpec(
        name="cross-encoder",
        factory=_build,
        description="a sentence-transformers CrossEncoder from a local folder scores each pair",
        config_model=CrossEncoderSettings,
    )
)
