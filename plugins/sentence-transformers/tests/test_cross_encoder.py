"""The ``cross-encoder`` reranker on a real (tiny, random) BERT cross-encoder the test builds
and saves locally: the order follows the model's own scores, through the staged search."""

from __future__ import annotations

from pathlib import Path

import pytest
from kairox_sentence_transformers.cross_encoder import (
    CrossEncoderReranker,
    CrossEncoderSettings,
    resolve_model_path,
)

from kairox.plugin_host.manager import build_plugin_manager
from kairox.retrieval import FusedHit, Provenance, Query

WORDS = [
    "retry",
    "failed",
    "uploads",
    "backoff",
    "jitter",
    "billing",
    "invoice",
    "search",
    "index",
    "disk",
    "files",
]
PASSAGES = [
    "retry failed uploads with backoff",
    "billing invoice files",
    "search index on disk",
    "uploads retry jitter",
    "invoice search files",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(vocab))
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def hits_in_reverse_model_order(scores: list[float]) -> list[FusedHit]:
    """Fused hits ordered worst-first by the model, so reranking must turn them around."""
    order = sorted(range(len(PASSAGES)), key=lambda i: scores[i])
    return [
        FusedHit(
            id=f"p{i}",
            text=PASSAGES[i],
            score=float(len(order) - rank),
            uri=None,
            metadata={},
            sources=(Provenance("words", rank + 1, 1.0),),
        )
        for rank, i in enumerate(order)
    ]


def test_the_order_follows_the_models_scores(tiny_model):
    from sentence_transformers import CrossEncoder

    query = "retry failed uploads"
    expected = CrossEncoder(str(tiny_model), device="cpu").predict([(query, p) for p in PASSAGES])
    assert len(set(float(s) for s in expected)) == len(PASSAGES)  # a strict order to follow
    hits = hits_in_reverse_model_order([float(s) for s in expected])
    reranked = CrossEncoderReranker(tiny_model).rerank(Query(query), hits)
    best_first = sorted(range(len(PASSAGES)), key=lambda i: -expected[i])
    assert [hit.id for hit in reranked] == [f"p{i}" for i in best_first]
    assert [hit.id for hit in reranked] != [hit.id for hit in hits]


def test_the_plugin_registers_it_with_its_settings(tiny_model):
    pm = build_plugin_manager(entry_points=True)
    spec = pm.registry.rerankers["cross-encoder"]
    assert pm.registry.rerankers.provider("cross-encoder") == "sentence-transformers"
    settings = CrossEncoderSettings(cross_encoder=str(tiny_model))
    assert spec.config_model is CrossEncoderSettings
    assert resolve_model_path(settings.cross_encoder) == tiny_model


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("", "no cross-encoder model is configured"),
        ("package:no_such_pkg_x", "no installed"),
        ("/nonexistent/model", "has no config.json"),
    ],
)
def test_a_missing_model_says_what_to_set(spec, why):
    with pytest.raises(ValueError, match=why):
        resolve_model_path(spec)
