"""A tiny fixture corpus with queries whose right answer any sensible engine finds.

Queries share distinctive words with exactly one document, so lexical engines (BM25,
hashing embeddings) and semantic ones (MiniLM) both rank it first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class CorpusDocument:
    """A document of the conformance corpus."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return f"corpus://{self.id}"


# id: (title, topic, year); one row a document, its text below under the same id.
_CARDS: dict[str, tuple[str, str, int]] = {
    "astro-1": ("Saturn's rings", "astronomy", 2021),
    "astro-2": ("Black holes", "astronomy", 2019),
    "bio-1": ("Photosynthesis", "biology", 2020),
    "bio-2": ("Mitochondria", "biology", 2018),
    "cook-1": ("Sourdough bread", "cooking", 2022),
    "cook-2": ("Espresso", "cooking", 2023),
    "code-1": ("Python generators", "programming", 2024),
    "code-2": ("SQL joins", "programming", 2017),
    "intl-1": ("Café culture", "cooking", 2016),
}
_TEXTS: dict[str, str] = {
    "astro-1": "Saturn's rings are made mostly of water ice particles orbiting the planet.",
    "astro-2": "A black hole is a region where gravity prevents even light from escaping.",
    "bio-1": "Plants convert sunlight, water and carbon dioxide into glucose and oxygen.",
    "bio-2": "Mitochondria produce most of the chemical energy a cell needs, stored as ATP.",
    "cook-1": "Sourdough bread rises with a fermented starter of wild yeast and lactobacilli.",
    "cook-2": "Espresso is brewed by forcing hot water through finely ground coffee beans.",
    "code-1": "A Python generator yields values lazily with the yield keyword.",
    "code-2": "An SQL inner join returns rows with matching keys in both tables.",
    "intl-1": "Le café parisien: croissants, crème brûlée et conversation en terrasse.",
}

CORPUS: tuple[CorpusDocument, ...] = tuple(
    CorpusDocument(id, title, _TEXTS[id], {"topic": topic, "year": year})
    for id, (title, topic, year) in _CARDS.items()
)

# (query, id of the one document that must come first among the top 3)
EXPECTED: tuple[tuple[str, str], ...] = (
    ("saturn rings ice", "astro-1"),
    ("black hole gravity light", "astro-2"),
    ("photosynthesis plants sunlight glucose", "bio-1"),
    ("mitochondria ATP energy cell", "bio-2"),
    ("sourdough starter yeast", "cook-1"),
    ("espresso coffee beans", "cook-2"),
    ("python generator yield", "code-1"),
    ("sql inner join tables", "code-2"),
)

# Strings a user can type that break naive query builders.
HOSTILE_QUERIES: tuple[str, ...] = (
    "",
    "   ",
    '"',
    '"unbalanced quote',
    "title:saturn",
    "(black hole",
    "black) hole(",
    "AND",
    "OR NOT AND",
    "saturn AND NOT rings",
    "-saturn",
    "saturn*",
    "*",
    "NEAR(saturn rings, 2)",
    "^caret {brace} [bracket]",
    "\\",
    "'; DROP TABLE documents; --",
    "café crème brûlée",
    "🚀 emoji",
    "x" * 2000,
    "\x00null\x00",
    "~fuzzy~2",
)
