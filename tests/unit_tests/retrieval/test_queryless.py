"""Query-less recall: the block chosen when there is no message to match (``get_context``)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from deermem_middleware import Memory
from deermem_middleware.config import MemoryConfig
from deermem_middleware.injection.recall import Recall
from deermem_middleware.memory.document import Fact
from deermem_middleware.retrieval.queryless import (
    QuerylessParams,
    choose_queryless,
    entity_richness,
    is_queryless,
    queryless_scores,
    spread,
    topic_similarity,
)
from deermem_middleware.retrieval.scoring import (
    FactIndex,
    SelectionParams,
    SelectionQuery,
    rank,
    score_facts,
)
from deermem_middleware.retrieval.selector import FactSelector

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def make_fact(fact_id: str, content: str, **extra: Any) -> Fact:
    """A knowledge fact (confidence 0.9, learnt 2026-01-01) with ``extra`` fields on top."""
    fields: dict[str, Any] = {
        "category": "knowledge",
        "confidence": 0.9,
        "createdAt": "2026-01-01T00:00:00Z",
    }
    return Fact(id=fact_id, content=content, **{**fields, **extra})


TOPICS = [
    "User adopted a puppy named Toby from the shelter",
    "User is learning to play the cello",
    "User works as a nurse at the Charité hospital",
    "User is allergic to peanuts",
    "User ran the Berlin marathon in 2025",
    "User's sister lives in Lisbon",
    "User prefers answers in bullet points",
    "User is reading Dune by Frank Herbert",
    "User drives a green Volvo estate",
    "User grows tomatoes on the balcony",
]

HIKING = [
    "User loves hiking in the Alps",
    "User really loves hiking in the Alps",
    "User loves going hiking in the Alps",
    "User loves hiking trips in the Alps",
    "User loves long hiking in the Alps",
    "User loves hiking in the Swiss Alps",
    "User loves hiking in the Alps in summer",
    "User loves hiking in the high Alps",
    "User loves hiking in the Alps with friends",
    "User still loves hiking in the Alps",
    "User loves hiking in the Alps a lot",
    "User loves weekend hiking in the Alps",
    "User loves hiking up in the Alps",
    "User loves hiking in the Alps every year",
    "User loves hiking in the Alps most of all",
]


def _facts() -> list[Fact]:
    return [make_fact(f"t{i}", text) for i, text in enumerate(TOPICS)]


def test_blank_means_queryless() -> None:
    assert is_queryless("")
    assert is_queryless("  \n", " ")
    assert not is_queryless("", "we talked about tea")
    assert not is_queryless("what about tea?")


def test_guaranteed_categories_come_first_newest_first() -> None:
    facts = [
        *_facts(),
        make_fact(
            "c-old",
            "Call me Sam, not Samuel",
            category="correction",
            createdAt="2025-01-01T00:00:00Z",
        ),
        make_fact(
            "c-new", "My name is spelt Sæm", category="correction", createdAt="2025-06-01T00:00:00Z"
        ),
    ]
    index = FactIndex(facts, now=NOW)
    picks = choose_queryless(index, QuerylessParams(), 5).picks  # corrections by default
    assert [index.facts[i].id for i in picks[:2]] == ["c-new", "c-old"]
    assert len(picks) == 5 and len(set(picks)) == 5
    # without the category named, they compete like any other fact
    plain = choose_queryless(index, QuerylessParams(guaranteed_categories=()), 12).picks
    assert [index.facts[i].id for i in plain[:2]] != ["c-new", "c-old"]


def test_guaranteed_facts_beyond_k_are_cut_newest_kept() -> None:
    facts = [
        make_fact(
            f"c{i}",
            f"Correction number {i} about topic {i}",
            category="correction",
            createdAt=f"2025-0{i + 1}-01T00:00:00Z",
        )
        for i in range(4)
    ]
    index = FactIndex(facts)
    picks = choose_queryless(index, QuerylessParams(guaranteed_categories=("correction",)), 2)
    assert [index.facts[i].id for i in picks.picks] == ["c3", "c2"]


def test_near_duplicates_of_one_topic_do_not_fill_the_block() -> None:
    # the restatements are the most used facts: by score alone they would fill the block
    hiking = [make_fact(f"h{i}", text, used=3, injections=4) for i, text in enumerate(HIKING)]
    index = FactIndex([*hiking, *_facts()], now=NOW)
    by_score = QuerylessParams(specificity_weight=0.0, entity_weight=0.0, diversity=0.0)
    crowded = choose_queryless(index, by_score, 15).picks
    assert all(index.facts[i].id.startswith("h") for i in crowded)
    spread_out = choose_queryless(index, dataclasses.replace(by_score, diversity=0.5), 15).picks
    # every other topic made it in; the restatements only fill the 5 places left over
    others = [index.facts[i].id for i in spread_out if not index.facts[i].id.startswith("h")]
    assert sorted(others) == sorted(f.id for f in _facts())
    assert index.facts[spread_out[0]].id.startswith("h")  # the best-scored fact still leads
    shipped = choose_queryless(index, QuerylessParams(), 15).picks
    assert sum(not index.facts[i].id.startswith("h") for i in shipped) == len(TOPICS)


def test_a_much_used_fact_beats_an_unused_one_all_else_equal() -> None:
    text = "User keeps bees on the roof"
    facts = [*_facts(), make_fact("unused", text), make_fact("used", text, used=4, injections=5)]
    index = FactIndex(facts, now=NOW)
    parts = queryless_scores(index, QuerylessParams())
    assert parts.score[-1] > parts.score[-2]
    picks = [index.facts[i].id for i in choose_queryless(index, QuerylessParams(), 12).picks]
    assert picks.index("used") < picks.index("unused")


def test_a_recent_fact_beats_an_old_one_all_else_equal() -> None:
    text = "User keeps bees on the roof"
    facts = [
        *_facts(),
        make_fact("old", text, createdAt="2025-01-01T00:00:00Z"),
        make_fact("new", text, createdAt="2026-02-01T00:00:00Z"),
    ]
    for now in (None, NOW):  # with and without decayed confidence
        index = FactIndex(facts, now=now)
        picks = [index.facts[i].id for i in choose_queryless(index, QuerylessParams(), 12).picks]
        assert picks.index("new") < picks.index("old")


def test_a_surer_fact_beats_a_less_sure_one_all_else_equal() -> None:
    text = "User keeps bees on the roof"
    facts = [*_facts(), make_fact("unsure", text, confidence=0.6), make_fact("sure", text)]
    index = FactIndex(facts, now=NOW)
    picks = [index.facts[i].id for i in choose_queryless(index, QuerylessParams(), 12).picks]
    assert picks.index("sure") < picks.index("unsure")


def test_specific_facts_beat_generic_ones() -> None:
    generic = [
        make_fact(f"g{i}", text)
        for i, text in enumerate(
            [
                "User likes things",
                "User likes many things",
                "User likes some things",
                "User likes talking about things",
            ]
        )
    ]
    index = FactIndex([*generic, make_fact("s", "Zanzibar ferry timetable on Tuesdays")])
    params = QuerylessParams(entity_weight=0.0, recency_weight=0.0, diversity=0.0)
    assert index.facts[choose_queryless(index, params, 1).picks[0]].id == "s"
    central = dataclasses.replace(params, specificity_weight=-1.0)
    assert index.facts[choose_queryless(index, central, 1).picks[0]].id.startswith("g")


def test_rare_entities_count_and_are_capped() -> None:
    facts = [make_fact(f"f{i}", f"User met someone on day {i}") for i in range(30)]
    facts.append(
        make_fact("e", "User flew Lufthansa to Reykjavik to meet Jonas Berg at the Harpa hall")
    )
    index = FactIndex(facts)
    richness = entity_richness(index, 3)
    assert richness[-1] == pytest.approx(1.0)
    assert richness[:-1].max() < 1.0
    assert entity_richness(index, 0).tolist() == [0.0] * len(facts)


def test_the_choice_is_deterministic() -> None:
    hiking = [make_fact(f"h{i}", text) for i, text in enumerate(HIKING)]
    facts = [*hiking, *_facts()]
    first = choose_queryless(FactIndex(facts, now=NOW), QuerylessParams(), 15).picks
    again = choose_queryless(FactIndex(facts, now=NOW), QuerylessParams(), 15).picks
    assert first == again
    index = FactIndex(facts, now=NOW)
    assert choose_queryless(index, QuerylessParams(), 15).picks == first
    assert choose_queryless(index, QuerylessParams(), 15).picks == first  # cached parts


def test_ties_go_to_the_newer_fact_then_the_earlier_position() -> None:
    facts = [
        make_fact("a", "same words here", createdAt="2025-01-01T00:00:00Z"),
        make_fact("b", "same words here", createdAt="2025-03-01T00:00:00Z"),
        make_fact("c", "same words here", createdAt="2025-03-01T00:00:00Z"),
    ]
    index = FactIndex(facts)
    params = QuerylessParams(recency_weight=0.0, diversity=0.0)
    assert [index.facts[i].id for i in choose_queryless(index, params, 3).picks] == ["b", "c", "a"]


def test_a_small_pool_still_fills_the_block_and_k_edge_cases() -> None:
    index = FactIndex(_facts())
    assert len(choose_queryless(index, QuerylessParams(pool=3), 8).picks) == 8
    assert choose_queryless(index, QuerylessParams(), 0).picks == ()
    assert len(choose_queryless(index, QuerylessParams(), 50).picks) == len(TOPICS)
    assert choose_queryless(FactIndex([]), QuerylessParams(), 5).picks == ()


def test_spread_is_maximal_marginal_relevance() -> None:
    scores = np.array([1.0, 0.95, 0.5])
    similarity = np.array([[1.0, 0.9, 0.0], [0.9, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert spread(scores, similarity, 2, 0.0) == [0, 1]
    assert spread(scores, similarity, 2, 1.0) == [0, 2]
    assert spread(scores, similarity, 5, 1.0) == [0, 2, 1]
    assert spread(scores, similarity, 0, 1.0) == []


def test_lexical_topic_similarity_is_the_cosine_of_the_stored_rows() -> None:
    index = FactIndex(_facts())
    positions = [3, 0, 7]
    similarity = topic_similarity(index, positions)
    texts = [index.facts[i].content for i in positions]
    assert similarity == pytest.approx(index.lexical.pairwise(texts))
    assert np.diag(similarity) == pytest.approx(1.0)
    centroid = index.lexical.centroid_similarity()
    assert centroid.shape == (len(TOPICS),) and (centroid > 0).all()


def test_dense_topic_similarity_is_centred() -> None:
    index = FactIndex(_facts()[:3])
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]])
    index.dense = vectors
    similarity = topic_similarity(index, [0, 2])
    assert float(vectors[0] @ vectors[2]) == pytest.approx(0.6)  # raw: close
    # centred on the mean, the two ends point away from each other
    a, c = vectors[0] - vectors.mean(axis=0), vectors[2] - vectors.mean(axis=0)
    expected = float(a @ c / np.linalg.norm(a) / np.linalg.norm(c))
    assert expected < 0
    assert similarity == pytest.approx(np.array([[1.0, expected], [expected, 1.0]]))


# -- through the selector ------------------------------------------------------------------------


def _memory() -> Memory:
    return Memory(
        facts=(
            *_facts(),
            make_fact("c", "Call me Sam, not Samuel", category="correction"),
            make_fact("u", "User keeps bees on the roof", used=2, injections=3),
        )
    )


def test_the_selector_uses_the_queryless_choice_for_a_blank_query() -> None:
    selector = FactSelector(SelectionParams.from_config(MemoryConfig()), clock=lambda: NOW)
    memory = _memory()
    picks = selector.select("k", memory, "", top_k=5)
    index = selector.index("k", memory)
    expected = choose_queryless(index, selector.params.queryless, 5).picks
    assert [p.fact.id for p in picks] == [index.facts[i].id for i in expected]
    assert picks[0].fact.id == "c" and picks[0].routes == (("guaranteed", 1.0),)
    for pick in picks[1:]:
        assert pick.routes[0][0] == "queryless"
        assert pick.routes[0][1] == pytest.approx(pick.score)
        assert pick.relevance == 0.0 and pick.semantic is None
    used = [p for p in selector.select("k", memory, [], top_k=12) if p.fact.id == "u"]
    assert dict(used[0].routes)["usage"] == pytest.approx(used[0].usage) and used[0].usage > 0


def test_the_guaranteed_categories_come_from_the_config() -> None:
    params = SelectionParams.from_config(MemoryConfig())
    assert params.queryless.guaranteed_categories == ("correction",)
    off = SelectionParams.from_config(MemoryConfig(guaranteed_token_budget=0))
    assert off.queryless.guaranteed_categories == ()


def test_a_query_or_context_keeps_the_relevance_formula() -> None:
    params = SelectionParams.from_config(MemoryConfig())
    selector = FactSelector(params, clock=lambda: NOW)
    memory = _memory()
    index = selector.index("k", memory)
    for query in (SelectionQuery("tell me about the puppy"), SelectionQuery("", "the puppy")):
        picks = selector.select("k", memory, query, top_k=6)
        parts = score_facts(index, query, params, now=NOW)
        assert [p.fact.id for p in picks] == [
            index.facts[i].id for i in rank(index, parts.score, 6)
        ]
        assert all(name != "queryless" for p in picks for name, _ in p.routes)


def test_the_seed_method_keeps_deerflows_formula_without_a_query() -> None:
    memory = Memory(
        facts=tuple(
            make_fact(f"s{i}", text, confidence=0.5 + 0.04 * i) for i, text in enumerate(TOPICS)
        )
    )
    seed = FactSelector(SelectionParams.from_config(MemoryConfig(selection="seed")))
    picks = seed.select("k", memory, "", top_k=4)
    assert [p.fact.id for p in picks] == ["s9", "s8", "s7", "s6"]  # confidence only
    assert all(p.routes == () for p in picks)


def test_the_injected_block_without_a_message_shows_each_fact_once() -> None:
    config = MemoryConfig(top_k=4)
    recall = Recall(config, FactSelector(SelectionParams.from_config(config), clock=lambda: NOW))
    rendered = recall.explain("k", _memory(), [])
    assert [g.fact.id for g in rendered.guaranteed] == ["c"]
    ids = [p.fact.id for p in rendered.ranked]
    assert len(ids) == 4 and "c" not in ids and len(set(ids)) == 4
    assert "Call me Sam" in rendered.text


def test_the_choice_is_made_once_per_revision_and_again_when_vectors_arrive() -> None:
    selector = FactSelector(SelectionParams.from_config(MemoryConfig()), clock=lambda: NOW)
    memory = _memory()
    first = selector.select("k", memory, "", top_k=6)
    index = selector.index("k", memory)
    key = (selector.params.queryless, 6)
    made = index.queryless_choices[key][1]
    assert [p.fact.id for p in selector.select("k", memory, [], top_k=6)] == [
        p.fact.id for p in first
    ]
    assert index.queryless_choices[key][1] is made  # a look-up, not a new choice
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(len(index), 8))
    index.dense = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    selector.select("k", memory, "", top_k=6)
    assert index.queryless_choices[key][0] is index.dense
    assert index.queryless_choices[key][1] is not made
