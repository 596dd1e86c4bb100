"""``EmbedProgress``: counts, rate and ETA."""

from __future__ import annotations

from kairox.support.embed_progress import EmbedProgress


def test_eta_follows_the_planned_work():
    progress = EmbedProgress(started=0.0)
    assert progress.eta is None  # nothing planned
    progress.plan(chunks=10, sentences=30)
    assert progress.eta is None  # nothing done yet
    progress.advance(chunks=10, sentences=10)
    eta = progress.eta
    assert eta is not None
    assert abs(eta - 1.0 * progress.elapsed) < 0.05 * progress.elapsed + 1e-6  # half done


def test_documents_stand_in_when_nothing_is_embedded():
    progress = EmbedProgress()
    progress.plan(documents=4)
    progress.advance(documents=2)
    assert progress.eta is not None
    assert progress.summary().startswith("2/4 documents written")


def test_summary_shows_the_stage_until_work_starts():
    calls: list[str] = []
    progress = EmbedProgress(listener=lambda p: calls.append(p.summary()))
    progress.set_stage("reading and chunking files 3/9")
    assert calls[-1].startswith("reading and chunking files 3/9")
    progress.plan(chunks=2)
    progress.advance(chunks=1)
    assert calls[-1].startswith("1/2 chunks embedded")
    assert len(calls) == 3


def test_planned_documents_lead_until_they_are_done():
    # A streaming run plans its files first and their chunks batch by batch: the files
    # are the honest measure until the last is read.
    progress = EmbedProgress()
    progress.plan(documents=10)
    progress.advance(documents=2)
    progress.plan(chunks=8)
    progress.advance(chunks=8)
    assert progress.measure() == (2, 10)
    progress.advance(documents=8)
    progress.plan(chunks=4)
    assert progress.measure() == (8, 12)
