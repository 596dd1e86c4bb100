"""Trace the packaged all-MiniLM-L6-v2 from torch to ONNX: the one step of the export that
needs torch.

Run as a script by :mod:`kairox_sentence_transformers.onnx_export`
(``python -P onnx_trace.py MODEL_FOLDER OUT``), not as ``-m``: the child then imports
torch and transformers only, not this package and Kairox (40 MB more at its peak). The
graph is traced with a two-row stand-in for the word-embedding table: the exporter holds
about three copies of every weight while it writes, and the table is half the weights
(30,522 x 384), so the child peaks at about 560 MB instead of 760. The export's next
step puts the real table back, by name (:data:`TABLE`).
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The word-embedding table's name in the traced graph.
TABLE = "bert.embeddings.word_embeddings.weight"


def trace(model_path: Path, out: Path) -> None:
    """Write ``out``: the model with mean pooling, its word-embedding table a stand-in."""
    import torch
    from transformers import AutoModel

    class MeanPooled(torch.nn.Module):
        # Mean pooling inside the graph: the runtime returns (batch, 384), not every
        # token's state, so nothing large is copied out.
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(
                str(model_path), local_files_only=True, attn_implementation="eager"
            )

        def forward(self, input_ids, attention_mask, token_type_ids):
            states = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(states.dtype)
            return (states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)

    model = MeanPooled()
    model.eval()
    embeddings = model.bert.embeddings.word_embeddings
    embeddings.weight = torch.nn.Parameter(
        torch.zeros((2, embeddings.weight.shape[1])), requires_grad=False
    )
    ids = torch.ones((2, 16), dtype=torch.int64)
    mask = torch.ones((2, 16), dtype=torch.int64)
    types = torch.zeros((2, 16), dtype=torch.int64)
    dynamic = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, mask, types),
            str(out),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": dynamic,
                "attention_mask": dynamic,
                "token_type_ids": dynamic,
                "sentence_embedding": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )


if __name__ == "__main__":
    trace(Path(sys.argv[1]), Path(sys.argv[2]))
