"""``WorkspaceRagIndex.index`` reports the chunks and sentences it embeds, planned first."""

from __future__ import annotations

from kairox.support.embed_progress import EmbedProgress
from kairox.testing import CountingEmbedder
from kairox.workspace.rag_index import FILES_PER_BATCH, WorkspaceRagIndex


def embedded_texts(embedder: CountingEmbedder) -> int:
    return sum(len(batch) for batch in embedder.calls)


def test_progress_counts_what_it_embeds_and_plans_it_first(database, project, embedder):
    seen: list[tuple[int, int, int, int]] = []
    progress = EmbedProgress(
        listener=lambda p: seen.append(
            (p.chunks_planned, p.sentences_planned, p.chunks, p.sentences)
        )
    )
    index = WorkspaceRagIndex(database, project, embedder, chunk_tokens=32, chunk_overlap=4)
    stats = index.index(embedding=progress)
    assert (progress.chunks, progress.sentences) == (
        stats.chunks_embedded,
        stats.sentences_embedded,
    )
    assert progress.chunks + progress.sentences == embedded_texts(embedder) > 0
    assert (progress.chunks_planned, progress.sentences_planned) == (
        progress.chunks,
        progress.sentences,
    )
    assert all(done <= planned for planned, _, done, _ in seen)
    assert all(done <= planned for _, planned, _, done in seen)
    assert progress.eta == 0.0
    assert "chunks" in progress.summary() and "/s" in progress.summary()


def test_files_are_planned_first_then_each_batch_before_it_is_embedded(
    database, embedder, two_file_batches
):
    root = two_file_batches(6)
    seen: list[tuple[int, int, int, int]] = []
    progress = EmbedProgress(
        listener=lambda p: seen.append(
            (p.documents_planned, p.documents, p.chunks_planned, p.chunks)
        )
    )
    WorkspaceRagIndex(database, root, embedder).index(embedding=progress)
    first_chunk_plan = next(i for i, s in enumerate(seen) if s[2])
    assert seen[first_chunk_plan][0] == 6, "the files to read are planned before any chunk"
    assert seen[first_chunk_plan][1] == 2, "the first batch is planned once it is read"
    grew = [i for i in range(1, len(seen)) if seen[i][2] > seen[i - 1][2]]
    assert len(grew) == 3, "one plan per batch of two files"
    # Each batch is planned only once the previous one is embedded.
    assert all(seen[i - 1][3] == seen[i - 1][2] for i in grew)
    assert progress.measure() == (6, 6)
    assert progress.summary().startswith("6/6 chunks, 6/6 files embedded")


def test_a_second_run_plans_and_embeds_nothing(database, project, embedder):
    index = WorkspaceRagIndex(database, project, embedder, chunk_tokens=32, chunk_overlap=4)
    index.index()
    progress = EmbedProgress()
    index.index(embedding=progress)
    assert (progress.chunks_planned, progress.sentences_planned, progress.embedded) == (0, 0, 0)


def test_switching_the_embedder_reports_the_re_embedding(database, project):
    WorkspaceRagIndex(database, project, CountingEmbedder(name="first")).index()
    second = CountingEmbedder(name="second")
    progress = EmbedProgress()
    stats = WorkspaceRagIndex(database, project, second).index(embedding=progress)
    assert progress.chunks == stats.chunks_embedded > 0
    assert progress.chunks_planned == progress.chunks
    assert progress.embedded == embedded_texts(second)


def test_one_sentence_chunks_are_embedded_once(database, tmp_path):
    root = tmp_path / "one"
    root.mkdir()
    (root / "a.txt").write_text("A single short sentence here.\n")
    embedder = CountingEmbedder()
    stats = WorkspaceRagIndex(database, root, embedder).index()
    assert (stats.chunks_embedded, stats.sentences_embedded) == (1, 0)
    assert embedded_texts(embedder) == 1


def test_a_sentence_that_is_a_later_batchs_chunk_is_counted_as_embedded(database, tmp_path):
    # The first file's second sentence is, word for word, the whole of a file in the next
    # batch: it is embedded with the first batch, as a sentence, and the later chunk then
    # finds its vector made. The plan must count it the same way.
    root = tmp_path / "batches"
    root.mkdir()
    shared = "The shared sentence is here and it is long enough to count."
    (root / "a000.txt").write_text(
        f"The protein binds the receptor in most tissues studied so far. {shared}"
    )
    for n in range(1, FILES_PER_BATCH + 1):
        (root / f"b{n:03d}.txt").write_text(f"Filler file number {n} says little.")
    (root / "z999.txt").write_text(shared)
    embedder = CountingEmbedder()
    progress = EmbedProgress()
    stats = WorkspaceRagIndex(database, root, embedder).index(embedding=progress)
    assert stats.added == FILES_PER_BATCH + 2
    assert (progress.chunks_planned, progress.sentences_planned) == (
        progress.chunks,
        progress.sentences,
    )
    assert progress.embedded == embedded_texts(embedder)


def test_the_counting_walk_is_made_only_for_a_progress(database, project, embedder, monkeypatch):
    from kairox.workspace import rag_index

    walks: list[int] = []
    real_walk = rag_index.iter_workspace_files

    def counted_walk(*args, **kwargs):
        walks.append(1)
        return real_walk(*args, **kwargs)

    monkeypatch.setattr(rag_index, "iter_workspace_files", counted_walk)
    index = WorkspaceRagIndex(database, project, embedder)
    index.index()
    assert len(walks) == 1
    (project / "README.md").write_text("# Rocket\nNow with a second stage.\n")
    progress = EmbedProgress()
    stats = index.index(embedding=progress)
    assert len(walks) == 3
    # README.md, and logo.png: a binary file is never stored, so it is read every run.
    assert (stats.updated, progress.documents_planned, progress.documents) == (1, 2, 2)
