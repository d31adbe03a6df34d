"""The feedback route: facts near the best first-pass matches rank higher (semantic channel)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from deermem_middleware.config import MemoryConfig
from deermem_middleware.injection.explain import _score_formula
from deermem_middleware.retrieval.scoring import (
    FactIndex,
    SelectionParams,
    SelectionQuery,
    feedback_bonus,
    rank,
    route_hits,
    score_facts,
)
from tests.helpers import make_fact


def _unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def test_the_bonus_is_the_scaled_closeness_to_the_centroid_of_the_best_seeds() -> None:
    dense = np.array([_unit(1, 0), _unit(1, 0.2), _unit(0, 1), _unit(0.7, 0.7), _unit(-1, 0)])
    seeds = np.array([0.9, 0.8, 0.1, 0.2, 0.0])
    bonus, similarity = feedback_bonus(dense, seeds, facts=2, hub=None, hub_weight=0.6)
    centroid = _unit(*(dense[0] + dense[1]))
    assert similarity == pytest.approx(dense @ centroid)
    low, high = similarity.min(), similarity.max()
    assert bonus == pytest.approx((similarity - low) / (high - low))
    assert bonus[4] == 0.0 and bonus.max() == pytest.approx(1.0)
    # the seeds' own scores only choose them; the closeness alone makes the bonus
    assert feedback_bonus(dense, seeds * 10, 2, None, 0.6)[0] == pytest.approx(bonus)


def test_hubness_is_taken_off_the_closeness_before_scaling() -> None:
    dense = np.array([_unit(1, 0), _unit(0.8, 0.6), _unit(0.6, 0.8)])
    hub = np.array([0.0, 0.0, 0.5])
    plain, _ = feedback_bonus(dense, np.array([1.0, 0.0, 0.0]), 1, None, 0.6)
    dehubbed, similarity = feedback_bonus(dense, np.array([1.0, 0.0, 0.0]), 1, hub, 0.6)
    assert similarity == pytest.approx(dense @ dense[0])  # reported raw
    assert plain.tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert dehubbed[2] == 0.0 and dehubbed[1] > 0.5


def test_more_seeds_than_facts_and_identical_vectors_are_harmless() -> None:
    dense = np.array([_unit(1, 0), _unit(1, 0)])
    bonus, similarity = feedback_bonus(dense, np.array([0.5, 0.4]), 5, None, 0.0)
    assert bonus.tolist() == [0.0, 0.0]  # no spread: no bonus
    assert similarity == pytest.approx([1.0, 1.0])


def test_only_the_pool_of_the_best_first_pass_facts_is_re_ranked() -> None:
    dense = np.array([_unit(1, 0), _unit(1, 0.1), _unit(0.9, 0.4), _unit(1, 0.05)])
    seeds = np.array([0.9, 0.8, 0.5, 0.1])  # the last is the closest to the seeds, but last
    bonus, similarity = feedback_bonus(dense, seeds, facts=2, hub=None, hub_weight=0.0, pool=3)
    assert bonus[3] == 0.0 and similarity[3] == 0.0  # outside the pool: not scored
    centroid = _unit(*(dense[0] + dense[1]))
    assert similarity[:3] == pytest.approx(dense[:3] @ centroid)
    assert bonus[:3].max() == pytest.approx(1.0) and bonus[2] == 0.0
    everyone, _ = feedback_bonus(dense, seeds, facts=2, hub=None, hub_weight=0.0)
    assert everyone[3] > 0.9  # the whole memory: it is scored too


def _index() -> FactIndex:
    """Three strong matches that share a second theme (d1), a fact mostly about that theme (T),
    a fact a little closer to the question but about something else (D), and filler."""
    facts = [make_fact(name, f"text {name}") for name in ("A", "B", "C", "T", "D")]
    facts += [make_fact(f"f{i}", f"filler {i}") for i in range(6)]
    index = FactIndex(facts)
    index.dense = np.array(
        [
            _unit(1, 0.5, 0, 0),
            _unit(1, 0.6, 0, 0),
            _unit(1, 0.4, 0, 0),
            _unit(0.3, 1, 0, 0),
            _unit(0.35, 0, 1, 0),
        ]
        + [_unit(0, 0, 0.1 * i, 1) for i in range(6)]
    )
    return index


PLAIN = SelectionParams(
    lexical_weight=0.0, hub_weight=0.0, confidence_weight=0.0, recency_weight=0.0
)
QUESTION = _unit(1, 0, 0, 0)


def test_a_fact_near_the_best_matches_outranks_one_a_little_closer_to_the_question() -> None:
    index = _index()
    query = SelectionQuery("q")
    off = score_facts(
        index, query, dataclasses.replace(PLAIN, feedback_weight=0.0), primary_vector=QUESTION
    )
    assert off.feedback is None
    assert rank(index, off.score, 5)[3:] == [4, 3]  # D before T on the question alone
    on = score_facts(index, query, PLAIN, primary_vector=QUESTION)
    assert on.feedback is not None
    assert rank(index, on.score, 5)[3:] == [3, 4]  # T, near A, B and C, now first
    assert np.allclose(on.score - off.score, PLAIN.feedback_weight * on.feedback)
    routes = route_hits(on, [3, 4], top_k=4)
    assert dict(routes[0])["feedback"] == pytest.approx(on.feedback_similarity[3])
    assert "feedback" not in dict(routes[1])  # D is not among the 4 nearest the centroid


def test_without_vectors_the_route_does_nothing() -> None:
    index = _index()
    index.dense = None
    parts = score_facts(index, SelectionQuery("text A"), PLAIN)
    assert parts.feedback is None and parts.feedback_similarity is None


def test_feedback_weight_comes_from_the_config_and_the_seed_formula_has_none() -> None:
    assert SelectionParams.from_config(MemoryConfig()).feedback_weight == 0.2
    assert SelectionParams.from_config(MemoryConfig(feedback_weight=0.0)).feedback_weight == 0.0
    seed = SelectionParams.from_config(MemoryConfig(selection="seed", feedback_weight=0.3))
    assert seed.feedback_weight == 0.0


def test_the_formula_names_the_route_only_with_the_semantic_channel() -> None:
    params = SelectionParams()
    assert "0.20 × feedback" in _score_formula(params, "", semantic=True)
    assert "feedback" not in _score_formula(params, "", semantic=False)
