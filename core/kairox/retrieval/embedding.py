"""The ``EmbeddingBackend`` protocol every embedding plugin implements, and embedding one
query with it (what every source that needs the query's vector shares)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


class QueryEmbeddingError(RuntimeError):
    """The query could not be embedded, so the sources that need the vector cannot run."""


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into vectors.

    ``name`` identifies the model (vectors of different names are never compared);
    ``dim`` is the vector width. ``embed`` returns a ``float32`` array of shape
    ``(len(texts), dim)``, one row per input in order, and must accept an empty list.

    A backend that holds a model may also offer ``loaded`` (whether the model is in
    memory) and ``release()`` (drop it; the next ``embed`` loads it again). An index or
    ingest run that loaded the model itself releases it after its last batch, so the
    work that follows (merging the words' index, writing the vector pack) does not sit
    next to it (:func:`model_loaded`, :func:`release_model`). With ``load()`` too, a run
    loads the model as a step of its own, shown in its progress as the backend's
    ``loading_note`` ("preparing the model (one-time export)"), else "loading the model"
    (:func:`load_model`), instead of as a first batch that seems to hang. A backend whose
    ``embed`` is quick in-process CPU work (no model to load, no server) may say
    ``local = True``: a search of one source that answers locally then embeds the query
    in the calling thread (:func:`embeds_locally`).

    Optional defaults a backend may declare for how its vectors are used (each a setting
    overrides): ``fusion_weight`` (their weight in the workspace's fusion, 1.0 when
    absent), ``sentence_weight`` (0 makes no sentence vectors; 0.5 when absent) and
    ``workspace_vectors`` (False: the workspace index keeps words only; True when absent).
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def embeds_locally(embedder: object | None) -> bool:
    """Whether a query can be embedded in the calling thread: no embedder, or one that
    says ``local = True`` (its ``embed`` is in-process CPU work with no model to load or
    server to ask, like the built-in ``hashing``)."""
    return embedder is None or getattr(embedder, "local", False) is True


def model_loaded(embedder: object) -> bool:
    """Whether ``embedder``'s model is in memory (``True`` for a backend that does not
    say, so that nothing is released that the caller did not load)."""
    return getattr(embedder, "loaded", True) is not False


def load_model(embedder: object, stage: Callable[[str], None]) -> None:
    """Load ``embedder``'s model now when it says it is not loaded and offers ``load()``,
    telling ``stage`` what that involves first (the backend's ``loading_note``)."""
    load = getattr(embedder, "load", None)
    if model_loaded(embedder) or not callable(load):
        return
    note = getattr(embedder, "loading_note", None) or "loading the model"
    stage(f"{note}...")
    load()


def release_model(embedder: object) -> None:
    """Drop ``embedder``'s model from memory, for a backend that offers ``release()``."""
    release = getattr(embedder, "release", None)
    if callable(release):
        release()


def embed_query(backend: Any, text: str) -> Any:
    """Embed one query text with ``backend`` and return its single row."""
    vectors = backend.embed([text])
    if len(vectors) != 1:
        raise ValueError(f"embed() returned {len(vectors)} rows for 1 text")
    return vectors[0]


def embedding_failed(backend: str, exc: Exception) -> QueryEmbeddingError:
    """The error of every source that needed ``backend``'s vector of the query."""
    error = QueryEmbeddingError(
        f"could not embed the query with backend {backend!r}: {type(exc).__name__}: {exc}"
    )
    error.__cause__ = exc
    return error
