"""The conversation route: facts learnt in the same conversation as a strong match rank higher."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from deermem_middleware import Memory
from deermem_middleware.config import MemoryConfig
from deermem_middleware.retrieval.scoring import (
    FactIndex,
    SelectionParams,
    SelectionQuery,
    score_facts,
    thread_bonus,
)
from deermem_middleware.retrieval.selector import FactSelector
from tests.helpers import make_fact

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def test_each_fact_gets_the_best_relevance_of_the_other_facts_of_its_thread() -> None:
    relevance = np.array([0.9, 0.2, 0.5, 0.4, 0.7, 0.3])
    threads = np.array([0, 0, 1, 1, -1, 0])
    bonus = thread_bonus(relevance, threads)
    # thread 0: the best (0.9) gets the second best (0.3), the others get 0.9
    assert bonus.tolist() == pytest.approx([0.3, 0.9, 0.4, 0.5, 0.0, 0.9])


def test_ties_at_the_top_of_a_thread_give_each_other_the_full_value() -> None:
    bonus = thread_bonus(np.array([0.8, 0.8, 0.1]), np.array([2, 2, 2]))
    assert bonus.tolist() == pytest.approx([0.8, 0.8, 0.8])


def test_a_thread_of_one_fact_and_negative_relevance_give_nothing() -> None:
    assert thread_bonus(np.array([0.6]), np.array([0])).tolist() == [0.0]
    assert thread_bonus(np.array([-0.4, -0.2]), np.array([0, 0])).tolist() == [0.0, 0.0]
    assert thread_bonus(np.array([]), np.array([], dtype=np.int64)).tolist() == []


def test_the_index_groups_facts_by_the_thread_they_were_learnt_in() -> None:
    index = FactIndex(
        [
            make_fact("a", "x", source="t1"),
            make_fact("b", "y"),
            make_fact("c", "z", source="t2"),
            make_fact("d", "w", source="t1"),
        ]
    )
    threads = index.threads
    assert threads[0] == threads[3] != threads[2]
    assert threads[1] == -1  # no source: no thread


def _memory() -> Memory:
    """Two facts with the same text: one learnt in the conversation about the hiking trip
    (thread ``hike``), the other elsewhere."""
    noise = [
        make_fact(f"n{i}", f"Enjoys {t} on weekends", source=f"other{i}")
        for i, t in enumerate(["tea", "jazz", "chess", "baking", "cycling", "poetry"] * 4)
    ]
    return Memory(
        facts=(
            *noise,
            make_fact("trip", "Went on a hiking trip in the Alps with her sister", source="hike"),
            make_fact("boots", "Bought new boots", source="hike"),
            make_fact("gift", "Bought new boots", source="shop"),
        )
    )


def test_a_fact_from_the_strong_matchs_conversation_outranks_its_twin_from_another() -> None:
    message = "What did she buy before the hiking trip in the Alps?"
    memory = _memory()
    off = FactSelector(SelectionParams(top_k=30, thread_weight=0.0), clock=lambda: NOW)
    before = {s.fact.id: s for s in off.select("a", memory, message)}
    assert before["boots"].score == pytest.approx(before["gift"].score)  # twins, route off
    picked = FactSelector(SelectionParams(top_k=30), clock=lambda: NOW).select("a", memory, message)
    ids = [s.fact.id for s in picked]
    assert ids[0] == "trip"
    assert ids.index("boots") < ids.index("gift")
    boots = picked[ids.index("boots")]
    assert boots.thread == pytest.approx(picked[0].relevance)
    assert dict(boots.routes)["thread"] == pytest.approx(boots.thread)
    assert "thread" not in dict(picked[ids.index("gift")].routes)  # alone in its thread


def test_the_route_off_leaves_scores_as_they_were() -> None:
    index = FactIndex(list(_memory().facts))
    query = SelectionQuery("What did she buy before the hiking trip in the Alps?")
    off = score_facts(index, query, SelectionParams(thread_weight=0.0))
    on = score_facts(index, query, SelectionParams(thread_weight=0.2))
    assert off.thread is None
    assert on.thread is not None
    assert np.allclose(on.score - off.score, 0.2 * on.thread)
    assert not np.allclose(on.score, off.score)


def test_thread_weight_comes_from_the_config_and_the_seed_formula_has_none() -> None:
    assert SelectionParams.from_config(MemoryConfig()).thread_weight == 0.2
    assert SelectionParams.from_config(MemoryConfig(thread_weight=0.0)).thread_weight == 0.0
    seed = SelectionParams.from_config(MemoryConfig(selection="seed", thread_weight=0.3))
    assert seed.thread_weight == 0.0
