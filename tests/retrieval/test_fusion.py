"""Fusion: exact scores on hand examples, weights that matter, de-duplication, determinism."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox.retrieval import FUSION_METHODS, FusedHit, Hit, Provenance, ScoreKind, fuse


def hits(source: str, *ids: str, scores: list[float] | None = None) -> list[Hit]:
    """Hits for ``ids`` in that order, each with its own text; scores default to n..1."""
    values = scores if scores is not None else [float(len(ids) - i) for i in range(len(ids))]
    return [
        Hit(id=i, text=f"text of {i}", score=s, source=source)
        for i, s in zip(ids, values, strict=True)
    ]


def ids(fused: list[FusedHit]) -> list[str]:
    return [hit.id for hit in fused]


def by_id(fused: list[FusedHit]) -> dict[str, FusedHit]:
    return {hit.id: hit for hit in fused}


# --- reciprocal rank fusion ----------------------------------------------------------------


def test_rrf_exact_values() -> None:
    fused = fuse({"A": hits("A", "x", "y", "z"), "B": hits("B", "y", "w")}, method="rrf")
    scores = {hit.id: hit.score for hit in fused}
    assert ids(fused) == ["y", "x", "w", "z"]
    assert scores["y"] == pytest.approx(1 / 62 + 1 / 61, rel=1e-12)
    assert scores["x"] == pytest.approx(1 / 61, rel=1e-12)
    assert scores["w"] == pytest.approx(1 / 62, rel=1e-12)
    assert scores["z"] == pytest.approx(1 / 63, rel=1e-12)
    assert by_id(fused)["y"].sources == (
        Provenance("A", 2, 2.0),
        Provenance("B", 1, 2.0),
    )


def test_rrf_k_changes_the_curve() -> None:
    fused = fuse({"A": hits("A", "x", "y")}, rrf_k=0, method="rrf")
    assert [hit.score for hit in fused] == pytest.approx([1.0, 0.5])


def test_rrf_ignores_scores() -> None:
    a = fuse({"A": hits("A", "x", "y", scores=[1000.0, -5.0])}, method="rrf")
    b = fuse({"A": hits("A", "x", "y", scores=[0.1, 0.09])}, method="rrf")
    assert [h.score for h in a] == [h.score for h in b]


# --- weights -------------------------------------------------------------------------------


def test_weight_three_on_b_flips_the_top_hit() -> None:
    ranked = {"A": hits("A", "a"), "B": hits("B", "b"), "C": hits("C", "a")}
    assert ids(fuse(ranked, method="rrf")) == ["a", "b"]  # a: 2/61 beats b: 1/61
    weighted = fuse(ranked, weights={"B": 3.0}, method="rrf")
    assert ids(weighted) == ["b", "a"]  # b: 3/61 beats a: 2/61
    assert weighted[0].score == pytest.approx(3 / 61)


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_weights_change_score_fusion_rankings(method: str) -> None:
    ranked = {
        "A": hits("A", "a1", "a2", scores=[10.0, 0.0]),
        "B": hits("B", "b1", "b2", scores=[5.0, 1.0]),
    }
    # Both sources normalise to the same values, so the top is a tie broken by id.
    assert ids(fuse(ranked, method=method))[0] == "a1"
    assert ids(fuse(ranked, method=method, weights={"B": 3.0}))[0] == "b1"


def test_weight_zero_removes_the_source() -> None:
    ranked = {"A": hits("A", "x", "shared"), "B": hits("B", "shared", "only-b")}
    fused = fuse(ranked, weights={"B": 0}, method="rrf")
    assert ids(fused) == ["x", "shared"]
    assert by_id(fused)["shared"].sources == (Provenance("A", 2, 1.0),)


def test_weights_for_unknown_sources_are_ignored() -> None:
    ranked = {"A": hits("A", "x")}
    assert fuse(ranked, weights={"nope": 5.0}, method="rrf") == fuse(ranked, method="rrf")


@pytest.mark.parametrize("weight", [-1.0, math.nan, math.inf])
def test_bad_weights_are_rejected(weight: float) -> None:
    with pytest.raises(ValueError, match="weight for source 'A'"):
        fuse({"A": hits("A", "x")}, weights={"A": weight}, method="rrf")


# --- score fusion --------------------------------------------------------------------------


def test_minmax_exact_values() -> None:
    ranked = {
        "A": hits("A", "a", "b", "c", scores=[10.0, 6.0, 2.0]),  # -> 1, 0.5, 0
        "B": hits("B", "b", "d", scores=[0.8, 0.4]),  # -> 1, 0
    }
    fused = fuse(ranked, method="minmax")
    assert ids(fused) == ["b", "a", "c", "d"]  # c and d tie at 0: by id
    assert [h.score for h in fused] == pytest.approx([1.5, 1.0, 0.0, 0.0])
    # A weight of 0.25 on B leaves b at 0.5 + 0.25, below a.
    reweighted = fuse(ranked, method="minmax", weights={"B": 0.25})
    assert ids(reweighted)[:2] == ["a", "b"]
    assert by_id(reweighted)["b"].score == pytest.approx(0.75)


def test_dbsf_exact_values() -> None:
    fused = fuse({"A": hits("A", "a", "b", "c", scores=[4.0, 2.0, 0.0])}, method="dbsf")
    std = math.sqrt(8 / 3)  # population std of 4, 2, 0 (mean 2)
    expected = [(s - (2 - 3 * std)) / (6 * std) for s in (4.0, 2.0, 0.0)]
    assert ids(fused) == ["a", "b", "c"]
    assert [h.score for h in fused] == pytest.approx(expected)
    assert fused[1].score == pytest.approx(0.5)  # the mean maps to the middle


def test_dbsf_clips_outliers_to_one() -> None:
    # Ten zeros and one 100: the outlier sits sqrt(10) > 3 std above the mean.
    names = [f"h{i:02}" for i in range(11)]
    fused = fuse({"A": hits("A", *names, scores=[100.0] + [0.0] * 10)}, method="dbsf")
    assert fused[0].id == "h00" and fused[0].score == 1.0
    assert fused[1].score == pytest.approx(0.5 - 1 / (6 * math.sqrt(10)))


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_zero_variance_sources_score_one(method: str) -> None:
    ranked = {
        "single": hits("single", "s", scores=[3.0]),
        "flat": hits("flat", "f1", "f2", scores=[0.5, 0.5]),
    }
    fused = fuse(ranked, method=method, weights={"single": 2.0})
    scores = {hit.id: hit.score for hit in fused}
    assert scores == {"s": 2.0, "f1": 1.0, "f2": 1.0}
    assert all(math.isfinite(s) for s in scores.values())


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_probability_scores_are_used_as_they_are(method: str) -> None:
    ranked = {"P": hits("P", "p1", "p2", scores=[0.9, 0.3])}
    fused = fuse(ranked, method=method, score_kinds={"P": ScoreKind.PROBABILITY})
    assert [h.score for h in fused] == pytest.approx([0.9, 0.3])
    # Any other kind is normalised instead.
    fused = fuse(ranked, method=method, score_kinds={"P": ScoreKind.COSINE})
    assert [h.score for h in fused] != pytest.approx([0.9, 0.3])


def test_distance_scores_are_normalised_like_any_other() -> None:
    # DISTANCE scores arrive already negated (higher is better).
    ranked = {"D": hits("D", "near", "far", scores=[-0.1, -0.9])}
    fused = fuse(ranked, method="minmax", score_kinds={"D": ScoreKind.DISTANCE})
    assert ids(fused) == ["near", "far"]
    assert [h.score for h in fused] == pytest.approx([1.0, 0.0])


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_score_fusion_rejects_non_finite_scores(method: str) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        fuse({"A": hits("A", "x", "y", scores=[1.0, math.nan])}, method=method)


# --- argument checks -----------------------------------------------------------------------


def test_unknown_method_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown fusion method 'borda'") as caught:
        fuse({"A": hits("A", "x")}, method="borda")
    for method in FUSION_METHODS:
        assert method in str(caught.value)


def test_bad_limit_and_rrf_k_are_rejected() -> None:
    with pytest.raises(ValueError, match="limit"):
        fuse({"A": hits("A", "x")}, limit=-1, method="rrf")
    with pytest.raises(ValueError, match="rrf_k"):
        fuse({"A": hits("A", "x")}, rrf_k=-1, method="rrf")


def test_empty_inputs() -> None:
    assert fuse({}, method="rrf") == []
    assert fuse({"A": [], "B": []}, method="rrf") == []
    assert fuse({"A": hits("A", "x")}, limit=0, method="rrf") == []


def test_limit_keeps_the_best() -> None:
    ranked = {"A": hits("A", "a", "b", "c", "d")}
    assert ids(fuse(ranked, limit=2, method="rrf")) == ["a", "b"]


# --- de-duplication ------------------------------------------------------------------------


def span_hit(source: str, id: str, text: str, uri: str | None, **metadata: object) -> Hit:
    return Hit(id=id, text=text, score=1.0, source=source, uri=uri, metadata=metadata)


def test_same_uri_and_span_merge_with_provenance_from_both() -> None:
    ranked = {
        "fts": [
            span_hit("fts", "f-0", "other", "docs/a.md", start=900, end=950),
            span_hit("fts", "f-1", "# Setup\nRun it.", "docs/a.md", start=0, end=120),
        ],
        "vec": [span_hit("vec", "v-9", "Setup — Run it.", "docs/a.md", start=0, end=120)],
    }
    fused = fuse(ranked, method="rrf")
    assert len(fused) == 2
    merged = next(h for h in fused if len(h.sources) == 2)
    assert merged.sources == (Provenance("fts", 2, 1.0), Provenance("vec", 1, 1.0))
    assert merged.score == pytest.approx(1 / 62 + 1 / 61)


def test_different_spans_of_one_uri_stay_apart() -> None:
    ranked = {
        "A": [span_hit("A", "a", "first part", "f.md", start=0, end=10)],
        "B": [span_hit("B", "b", "second part", "f.md", start=10, end=20)],
    }
    assert sorted(ids(fuse(ranked, method="rrf"))) == ["a", "b"]


def test_same_uri_without_spans_merges_but_span_versus_none_does_not() -> None:
    no_span = {
        "A": [span_hit("A", "a", "whole file", "f.md")],
        "B": [span_hit("B", "b", "the file, re-read", "f.md")],
    }
    assert len(fuse(no_span, method="rrf")) == 1
    half = {
        "A": [span_hit("A", "a", "whole file", "f.md")],
        "B": [span_hit("B", "b", "a chunk", "f.md", start=0, end=5)],
    }
    assert len(fuse(half, method="rrf")) == 2


def test_same_normalised_text_merges() -> None:
    ranked = {
        "A": [span_hit("A", "a", "  Hello,\n\tWORLD  ", "a.txt")],
        "B": [span_hit("B", "b", "hello, world", None)],
    }
    fused = fuse(ranked, method="rrf")
    assert len(fused) == 1
    assert [p.source for p in fused[0].sources] == ["A", "B"]


def test_text_that_folds_into_ascii_merges_with_its_ascii_copy() -> None:
    # "ﬁ" (one character) folds into "fi".
    ranked = {
        "A": [span_hit("A", "a", "The \ufb01le was  SAVED", None)],
        "B": [span_hit("B", "b", "the file was saved", None)],
    }
    assert len(fuse(ranked, method="rrf")) == 1


def test_a_text_several_sources_return_is_hashed_once(monkeypatch) -> None:
    from kairox.retrieval import fusion

    calls: list[str] = []
    original = fusion._normalise

    def counting(text: str) -> str:
        calls.append(text)
        return original(text)

    monkeypatch.setattr(fusion, "_normalise", counting)
    fusion._text_key.cache_clear()  # nothing remembered from other tests
    ranked = {
        name: [
            span_hit(name, f"{name}-1", "same passage", None),
            span_hit(name, f"{name}-2", name, None),
        ]
        for name in ("A", "B", "C")
    }
    fused = fuse(ranked, method="rrf")
    assert len(fused) == 4  # the shared passage once, and each source's own
    assert sorted(calls) == ["A", "B", "C", "same passage"]
    # The next search over the same passages hashes none of them again.
    assert [h.id for h in fuse(ranked, method="rrf")] == [h.id for h in fused]
    assert len(calls) == 4


def test_a_ranking_beside_sources_that_found_nothing_is_not_hashed(monkeypatch) -> None:
    from kairox.retrieval import fusion

    calls: list[str] = []
    original = fusion._normalise
    monkeypatch.setattr(fusion, "_normalise", lambda text: calls.append(text) or original(text))
    fusion._text_key.cache_clear()  # nothing remembered from other tests
    fused = fuse({"a": hits("a", "x", "y"), "b": [], "c": []}, method="convex")
    assert ids(fused) == ["x", "y"]
    assert calls == []  # nothing to merge with: no passage key is computed


def test_empty_text_never_merges_on_text() -> None:
    ranked = {"A": [span_hit("A", "a", "", None)], "B": [span_hit("B", "b", "  ", None)]}
    assert sorted(ids(fuse(ranked, method="rrf"))) == ["a", "b"]


def test_sameness_is_transitive() -> None:
    ranked = {
        "A": [span_hit("A", "a", "alpha", "f.md")],
        "B": [span_hit("B", "b", "beta", "f.md")],  # same uri as a
        "C": [span_hit("C", "c", "BETA", None)],  # same text as b
    }
    fused = fuse(ranked, method="rrf")
    assert len(fused) == 1
    assert [p.source for p in fused[0].sources] == ["A", "B", "C"]


def test_chunks_of_one_uri_within_one_source_stay_apart() -> None:
    # Chunk-level sources (Bedrock) return several chunks of one document with one uri
    # and no span; they are different passages.
    ranked = {
        "kb": [
            span_hit("kb", "c1", "part one", "s3://b/doc"),
            span_hit("kb", "c2", "part two", "s3://b/doc"),
        ]
    }
    assert ids(fuse(ranked, method="rrf")) == ["c1", "c2"]


def test_duplicate_ids_within_a_source_keep_the_first() -> None:
    ranked = {
        "A": [
            Hit("x", "first copy", 3.0, "A"),
            Hit("x", "second copy", 2.0, "A"),
            Hit("y", "y text", 1.0, "A"),
        ]
    }
    fused = fuse(ranked, method="rrf")
    assert ids(fused) == ["x", "y"]
    assert fused[0].text == "first copy"
    assert fused[1].sources == (Provenance("A", 2, 1.0),)  # ranks close up


# --- which copy survives -------------------------------------------------------------------


def copy(source: str, id: str, text: str) -> Hit:
    return Hit(id, text, 1.0, source, uri=f"{source}://{id}", metadata={"from": source})


def test_the_best_ranked_copy_survives() -> None:
    ranked = {
        "A": [copy("A", "a0", "filler"), copy("A", "a1", "Same Passage")],
        "B": [copy("B", "b1", "same   passage")],
    }
    for order in (ranked, dict(reversed(ranked.items()))):
        merged = by_id(fuse(order, method="rrf"))["b1"]
        assert (merged.text, merged.uri, merged.metadata) == (
            "same   passage",
            "B://b1",
            {"from": "B"},
        )
        assert merged.source == "B"


def test_equal_ranks_go_to_the_heavier_source_then_the_first_name() -> None:
    ranked = {"A": [copy("A", "a1", "same passage")], "B": [copy("B", "b1", "SAME passage")]}
    assert ids(fuse(ranked, method="rrf")) == ["a1"]
    assert ids(fuse(ranked, weights={"B": 2.0}, method="rrf")) == ["b1"]
    assert ids(fuse(dict(reversed(ranked.items())), method="rrf")) == ["a1"]


# --- properties ----------------------------------------------------------------------------

# A pool of passages: a given id always means the same text and uri, as with real sources.
POOL = [
    Hit(
        id=f"p{i}",
        text=f"passage number {i}",
        score=0.0,
        source="",
        uri=f"file{i % 3}.md" if i % 4 else None,
        metadata={"start": i, "end": i + 1} if i % 2 else {},
    )
    for i in range(12)
]


@st.composite
def fusion_inputs(draw: st.DrawFn) -> tuple[dict[str, list[Hit]], dict[str, float], str]:
    names = draw(st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=5, unique=True))
    ranked: dict[str, list[Hit]] = {}
    for name in names:
        picks = draw(st.lists(st.sampled_from(POOL), max_size=8))  # repeats allowed
        scores = draw(
            st.lists(
                st.floats(-100, 100, allow_nan=False), min_size=len(picks), max_size=len(picks)
            )
        )
        ranked[name] = [
            Hit(p.id, p.text, s, name, p.uri, p.metadata)
            for p, s in zip(picks, sorted(scores, reverse=True), strict=True)
        ]
    weights = draw(st.dictionaries(st.sampled_from(names), st.sampled_from([0.0, 0.5, 1.0, 3.0])))
    method = draw(st.sampled_from(FUSION_METHODS))
    return ranked, weights, method


@settings(max_examples=200, deadline=None)
@given(fusion_inputs(), st.randoms(use_true_random=False))
def test_fusion_ignores_source_order_and_is_deterministic(inputs, rng) -> None:
    ranked, weights, method = inputs
    names = list(ranked)
    rng.shuffle(names)
    shuffled = {name: ranked[name] for name in names}
    first = fuse(ranked, method=method, weights=weights)
    assert fuse(shuffled, method=method, weights=weights) == first
    assert fuse(ranked, method=method, weights=weights) == first


@settings(max_examples=200, deadline=None)
@given(fusion_inputs(), st.integers(0, 10))
def test_ids_are_unique_best_first_and_limited(inputs, limit) -> None:
    ranked, weights, method = inputs
    full = fuse(ranked, method=method, weights=weights)
    output_ids = ids(full)
    assert len(output_ids) == len(set(output_ids))
    assert set(output_ids) <= {hit.id for hits in ranked.values() for hit in hits}
    scores = [hit.score for hit in full]
    assert scores == sorted(scores, reverse=True)
    for hit in full:
        names = [p.source for p in hit.sources]
        assert names == sorted(set(names))
        assert all(weights.get(n, 1.0) > 0 for n in names)
    limited = fuse(ranked, method=method, weights=weights, limit=limit)
    assert len(limited) <= limit
    assert limited == full[:limit]


@settings(max_examples=2000, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(
            list("aZ .,\n\t\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000É\ufb01ßİΣς")
        ),
        max_size=30,
    )
)
def test_the_fast_normalisation_matches_splitting_into_words(text: str) -> None:
    from kairox.retrieval.fusion import _normalise

    assert _normalise(text) == " ".join(text.casefold().split())


@pytest.mark.parametrize("method", sorted(FUSION_METHODS))
def test_a_single_ranking_fuses_as_it_would_next_to_an_unrelated_source(method) -> None:
    # Same text under two ids and a repeated uri without span: only another source could
    # tie them together, so alone they stay apart, as they do beside a source they miss.
    alone = hits("a", "d1", "d2", "d3", "d1", scores=[3.0, 2.0, 2.0, 1.0])
    alone[2] = Hit(id="d3", text=alone[1].text, score=2.0, source="a", uri="f.txt")
    alone[1] = Hit(id="d2", text=alone[1].text, score=2.0, source="a", uri="f.txt")
    other = hits("b", "elsewhere")
    single = fuse({"a": alone}, method=method)
    both = [hit for hit in fuse({"a": alone, "b": other}, method=method) if hit.id != "elsewhere"]
    assert ids(single) == ["d1", "d2", "d3"]
    assert single == both
    assert fuse({"a": alone, "b": other}, method=method, weights={"b": 0}) == single
    # A source that found nothing leaves the ranking single: it is not merged either.
    assert fuse({"a": alone, "b": []}, method=method) == single
