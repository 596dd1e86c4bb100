"""The per-query fast path: cached term clauses, plain rows, hits that still carry their text."""

from __future__ import annotations

import asyncio
import threading

from kairox_tantivy import TantivyIndex, TantivySource

from kairox.retrieval import FAN_OUT, Document, Query
from kairox.testing import run


def test_cached_clauses_still_see_documents_committed_later(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    index.upsert([Document("a", "ring of saturn", title="Saturn")])
    first = index.search("saturn rings", 10, title_boost=0.5)
    assert [hit.id for hit in first] == ["a"]
    # The same terms again, now from the clause cache, after another commit.
    index.upsert([Document("b", "saturn saturn rings rings", title="Saturn rings")])
    again = index.search("saturn rings", 10, title_boost=0.5)
    assert [hit.id for hit in again] == ["b", "a"]
    index.delete(["b"])
    assert [hit.id for hit in index.search("saturn rings", 10, title_boost=0.5)] == ["a"]


def test_a_boost_change_is_not_served_from_another_boosts_clause(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    index.upsert(
        [
            Document("title-match", "unrelated words here", title="comet"),
            Document("body-match", "a comet passed by", title="news"),
        ]
    )
    title_heavy = index.search("comet", 10, title_boost=10.0)
    body_only = index.search("comet", 10, title_boost=0.0)
    assert title_heavy[0].id == "title-match"
    assert [hit.id for hit in body_only] == ["body-match"]


def test_rows_and_hits_agree_and_carry_everything_stored(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    index.upsert(
        [
            Document("m", "orbit of mars", title="Mars", uri="file:///mars.md", metadata={"n": 2}),
            Document("plain", "mars again, no title, no metadata"),
        ]
    )
    rows = index.search_rows("mars", 10)
    hits = index.search("mars", 10)
    assert [(r[0], r[1]) for r in rows] == [(h.score, h.id) for h in hits]
    by_id = {hit.id: hit for hit in hits}
    assert (by_id["m"].title, by_id["m"].body, by_id["m"].uri) == (
        "Mars",
        "orbit of mars",
        "file:///mars.md",
    )
    assert by_id["m"].metadata == {"n": 2}
    assert (by_id["plain"].title, by_id["plain"].uri, by_id["plain"].metadata) == ("", None, {})


def test_source_hits_carry_title_and_text(tmp_path, make_source):
    source = make_source(tmp_path)
    source.upsert([Document("v", "Venus is hot.", title="Venus", metadata={"kind": "planet"})])
    (hit,) = run(source.retrieve(Query("venus")))
    assert hit.text == "Venus\nVenus is hot."
    assert hit.metadata == {"kind": "planet", "title": "Venus"}
    assert hit.source == source.name


def test_alone_it_answers_on_the_loop_beside_others_in_a_thread(tmp_path):
    threads: list[threading.Thread] = []

    class Recording(TantivySource):
        def _search(self, query):
            threads.append(threading.current_thread())
            return super()._search(query)

    source = Recording("papers", tmp_path / "index")
    source.upsert([Document("j", "Jupiter is large.", title="Jupiter")])

    async def ask(fan_out: int) -> list[str]:
        token = FAN_OUT.set(fan_out)
        try:
            return [hit.id for hit in await source.retrieve(Query("jupiter"))]
        finally:
            FAN_OUT.reset(token)

    async def both() -> tuple[list[str], list[str], threading.Thread]:
        return await ask(1), await ask(2), threading.current_thread()

    alone, beside, loop_thread = asyncio.run(both())
    assert alone == beside == ["j"]
    assert threads[0] is loop_thread
    assert threads[1] is not loop_thread
