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


CORPUS: tuple[CorpusDocument, ...] = (
    CorpusDocument(
        "astro-1",
        "Saturn's rings",
        "Saturn's rings are made mostly of water ice particles orbiting the planet.",
        {"topic": "astronomy", "year": 2021},
    ),
    CorpusDocument(
        "astro-2",
        "Black holes",
        "A black hole is a region where gravity prevents even light from escaping.",
        {"topic": "astronomy", "year": 2019},
    ),
    CorpusDocument(
        "bio-1",
        "Photosynthesis",
        "Plants convert sunlight, water and carbon dioxide into glucose and oxygen.",
        {"topic": "biology", "year": 2020},
    ),
    CorpusDocument(
        "bio-2",
        "Mitochondria",
        "Mitochondria produce most of the chemical energy a cell needs, stored as ATP.",
        {"topic": "biology", "year": 2018},
    ),
    CorpusDocument(
        "cook-1",
        "Sourdough bread",
        "Sourdough bread rises with a fermented starter of wild yeast and lactobacilli.",
        {"topic": "cooking", "year": 2022},
    ),
    CorpusDocument(
        "cook-2",
        "Espresso",
        "Espresso is brewed by forcing hot water through finely ground coffee beans.",
        {"topic": "cooking", "year": 2023},
    ),
    CorpusDocument(
        "code-1",
        "Python generators",
        "A Python generator yields values lazily with the yield keyword.",
        {"topic": "programming", "year": 2024},
    ),
    CorpusDocument(
        "code-2",
        "SQL joins",
        "An SQL inner join returns rows with matching keys in both tables.",
        {"topic": "programming", "year": 2017},
    ),
    CorpusDocument(
        "intl-1",
        "Café culture",
        "Le café parisien: croissants, crème brûlée et conversation en terrasse.",
        {"topic": "cooking", "year": 2016},
    ),
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
