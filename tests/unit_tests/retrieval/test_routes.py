"""Every recall route is one unit: its weight is a config field with the same default, the
selection parameters come from the config in one place, and each route that ran is reported."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from deermem_middleware import MemoryConfig
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.retrieval.params import SELECTION_DEFAULTS, SelectionParams
from deermem_middleware.retrieval.routes import ROUTE_ABBREVIATIONS, ROUTES, Route, RouteWeights
from deermem_middleware.retrieval.selector import FactSelector

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def test_each_route_weight_is_a_config_field_with_the_same_default() -> None:
    weights = {f.name for f in dataclasses.fields(RouteWeights)}
    named = {r.weight for r in ROUTES if r.weight is not None}
    assert named == weights  # no weight without a route, no route without its weight
    for name in weights:
        assert MemoryConfig.model_fields[name].default == getattr(SELECTION_DEFAULTS, name)


def test_config_defaults_are_the_selection_defaults() -> None:
    shared = [
        f.name
        for f in dataclasses.fields(SelectionParams)
        if f.name in MemoryConfig.model_fields and f.name != "recall_rules"  # compiled, not copied
    ]
    assert "top_k" in shared and "query_turns" in shared
    for name in shared:
        default = MemoryConfig.model_fields[name].default
        if default is not None:  # None: the method's own (relevance_weight, confidence_weight)
            assert default == getattr(SELECTION_DEFAULTS, name), name


@pytest.mark.parametrize("route", [r for r in ROUTES if r.weight is not None], ids=lambda r: r.name)
def test_seed_selection_turns_the_deermem_only_routes_off(route: Route) -> None:
    assert route.weight is not None
    seed = SelectionParams.from_config(MemoryConfig(selection="seed"))
    value = getattr(seed, route.weight)
    if route.deermem_only:
        assert value == 0.0
    else:
        assert value == getattr(MemoryConfig(), route.weight)


def test_route_names_and_abbreviations_are_unique() -> None:
    names = [r.name for r in ROUTES]
    assert len(names) == len(set(names))
    assert len(set(ROUTE_ABBREVIATIONS.values())) == len(ROUTE_ABBREVIATIONS)


def test_a_pick_carries_each_route_that_ran_under_its_name() -> None:
    facts = tuple(
        Fact(id=f"f{i}", content=text, category="context", confidence=0.9, createdAt=created)
        for i, (text, created) in enumerate(
            [
                ("Alice moved to Paris in May 2024", "2024-05-20T10:00:00Z"),
                ("Bob plays chess on Sundays", "2023-01-02T10:00:00Z"),
            ]
        )
    )
    selector = FactSelector(SelectionParams(), clock=lambda: NOW)
    top = selector.select("k", Memory(facts=facts), "What did Alice do last month?")[0]
    assert top.fact.id == "f0"
    ran = dict(top.bonuses)
    assert {"recency", "usage", "time", "entity"} <= set(ran)
    assert top.time == ran["time"] > 0 and top.entity == ran["entity"] > 0
    assert top.recency == ran["recency"] == 1.0
    assert [name for name, _ in top.routes] == [
        r.name for r in ROUTES if r.name in dict(top.routes)
    ]  # reported in the order of ROUTES
