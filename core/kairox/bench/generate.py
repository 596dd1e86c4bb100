"""``kairox bench generate-queries``: judgments for a knowledge base that has none.

``n`` passages are sampled (``seed``) from the knowledge base; the profile's model is
asked, for each, to write one question the passage answers (:data:`PROMPT`), and the
folder gets a BEIR dataset: ``corpus.jsonl`` (every passage of the knowledge base),
``queries.jsonl``, ``qrels/test.tsv`` (each question's own passage judged 1) and
``generated.json`` (the model, the prompt, the seed). Such judgments measure recall of
the sampled passage only: another passage that answers the question counts as a miss.
The knowledge base must be able to read its passages back (``documents(ids)``, as
``sqlite-fts`` does).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kairox.bench import BenchError
from kairox.retrieval import Document
from kairox.support.models import ChatMessage

if TYPE_CHECKING:
    from kairox.runtime.facade import AppFacade
    from kairox.support.models import ModelBackend

PROMPT = (
    "Write one question that someone searching a document collection might ask, and that "
    "the passage below answers. Use your own words rather than long phrases of the "
    'passage, and do not mention "the passage". Reply with the question only, on one '
    "line.\n\nTitle: {title}\nPassage: {text}"
)
MAX_PASSAGE_CHARS = 2000
NOTE = (
    "generated judgments: one question per sampled passage, that passage judged relevant; "
    "they measure recall of the sampled passage only"
)


@runtime_checkable
class PassageReader(Protocol):
    """A knowledge base that can list its ids and read passages back."""

    def fingerprints(self) -> dict[str, str]: ...

    def documents(self, ids: Sequence[str]) -> list[Document]: ...


def question_prompt(passage: Document) -> str:
    return PROMPT.format(title=passage.title or "-", text=passage.text[:MAX_PASSAGE_CHARS])


async def ask(backend: ModelBackend, model: str, passage: Document) -> str:
    """The model's question for ``passage`` (one line, stripped)."""
    pieces = [
        piece
        async for piece in backend.stream(
            [ChatMessage("user", question_prompt(passage))], model=model, max_tokens=100
        )
    ]
    lines = [line.strip() for line in "".join(pieces).splitlines() if line.strip()]
    if not lines:
        raise BenchError(f"the model returned no question for passage {passage.id!r}")
    return lines[0].strip('"')


def generate(
    facade: AppFacade,
    kb_id: str,
    n: int,
    out: Path,
    *,
    profile: str | None = None,
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Write the dataset to ``out``; returns the manifest (``generated.json``)."""
    entry = facade._knowledge_base_entry(kb_id)
    source = facade.sources.knowledge_base(entry)
    if not isinstance(source, PassageReader):
        raise BenchError(
            f"knowledge base {kb_id!r} (kind {entry.kind!r}) cannot read its passages back; "
            "generate-queries samples from a kind that can, such as sqlite-fts"
        )
    ids = sorted(source.fingerprints())
    if not ids:
        raise BenchError(f"knowledge base {kb_id!r} is empty: `kairox kb ingest {kb_id} PATH`")
    if n > len(ids):
        raise BenchError(f"--n {n} is more than the {len(ids)} passages of {kb_id!r}")
    name, settings = facade.config.resolve_profile(profile or "default")
    backend = facade.model_backend(settings, profile_name=name)
    sampled = source.documents(random.Random(seed).sample(ids, n))

    async def ask_all() -> list[str]:
        questions = []
        for done, passage in enumerate(sampled, start=1):
            questions.append(await ask(backend, settings.model, passage))
            if progress is not None:
                progress(f"asking {settings.model}", done, len(sampled))
        return questions

    questions = asyncio.run(ask_all())
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for start in range(0, len(ids), 1000):
            for doc in source.documents(ids[start : start + 1000]):
                record = {"_id": doc.id, "title": doc.title, "text": doc.text}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for number, question in enumerate(questions):
            handle.write(json.dumps({"_id": f"g{number}", "text": question}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"]
    rows += [f"g{number}\t{passage.id}\t1" for number, passage in enumerate(sampled)]
    (out / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    manifest = {
        "generated": True,
        "knowledge_base": kb_id,
        "profile": name,
        "backend": settings.backend,
        "model": settings.model,
        "queries": n,
        "seed": seed,
        "prompt": PROMPT,
        "note": NOTE,
    }
    (out / "generated.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def generated_judgments(*folders: Path | None) -> dict[str, Any] | None:
    """The ``generated.json`` manifest of the first folder that has one."""
    for folder in folders:
        if folder is not None and (folder / "generated.json").is_file():
            try:
                return json.loads((folder / "generated.json").read_text(encoding="utf-8"))
            except ValueError:
                return None
    return None
