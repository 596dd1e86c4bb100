"""The ``EmbeddingBackend`` protocol every embedding plugin implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into vectors.

    ``name`` identifies the model (vectors of different names are never compared);
    ``dim`` is the vector width. ``embed`` returns a ``float32`` array of shape
    ``(len(texts), dim)``, one row per input in order, and must accept an empty list.

    A backend that holds a model may also offer ``loaded`` (whether the model is in
    memory) and ``release()`` (drop it; the next ``embed`` loads it again). An index run
    that loaded the model itself releases it after its last batch, so the work that
    follows (merging the words' index, writing the vector pack) does not sit next to it.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
