"""The entity route, the rule route, and the route logs (which routes found each picked fact)."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import HumanMessage

from deermem_middleware import Fact, Memory, MemoryMiddleware
from deermem_middleware.config import ConfigError, MemoryConfig
from deermem_middleware.extraction.json_schema import update_json_schema
from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.document import MAX_ENTITIES
from deermem_middleware.memory.update import MemoryUpdate
from deermem_middleware.retrieval.entities import EntityIndex, extract_entities
from deermem_middleware.retrieval.scoring import (
    FactIndex,
    SelectionParams,
    SelectionQuery,
    rank,
    rank_diverse,
    recall_rules_from_config,
    score_facts,
)
from deermem_middleware.retrieval.selector import FactSelector
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import MemoryScope
from tests.helpers import make_fact, memory_config

NOW = datetime(2026, 3, 1, tzinfo=UTC)


# -- entities by rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Caroline visited the Grand Canyon.", {"caroline", "grand canyon", "canyon"}),
        (
            "User is migrating from MySQL to PostgreSQL and writes Go.",
            {"mysql", "postgresql", "go"},
        ),
        (
            "Uses GPT-4 on an iPhone with macOS and Node.js.",
            {"gpt-4", "iphone", "macos", "node.js"},
        ),
        ('Read "Embracing Identity" last week', {"embracing identity"}),
        ("Lives in New York City", {"new york city", "york"}),
        ("我用Go写代码，住在杭州市，在浙江大学读书", {"go", "杭州", "浙江大学"}),
        ("用户最喜欢的书是《三体》", {"三体"}),
        ("ユーザーはコーヒーが好き", {"コーヒー"}),
        ("用户住在北京", {"北京"}),
    ],
)
def test_rules_find_names_products_places_and_titles(text: str, expected: set[str]) -> None:
    assert expected <= set(extract_entities(text))


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("What did the user say yesterday?", {"what", "user", "yesterday"}),
        ("Prefers tea over coffee", {"prefers"}),
        ("Attended a workshop on Monday", {"attended", "monday"}),
        ("ユーザーはコーヒーが好き", {"ユーザー"}),
        ("Has 3 cats and 12 plants", {"3", "12", "has"}),
        ("我用Go写代码", {"go写代码"}),
    ],
)
def test_rules_skip_words_capitalised_for_grammar(text: str, absent: set[str]) -> None:
    assert not absent & set(extract_entities(text))


def test_a_message_in_lower_case_still_names_the_facts_entities() -> None:
    index = EntityIndex(
        [("postgresql",), ("hangzhou",), ("杭州",), *[(f"x{i}",) for i in range(20)]]
    )
    assert index.matches("how do I tune postgresql in hangzhou?") == ["hangzhou", "postgresql"]
    assert index.matches("我下周去杭州出差") == ["杭州"]
    bonus, names = index.bonus("tune postgresql")
    assert names == ["postgresql"] and bonus[0] == 1.0 and bonus[1:].sum() == 0


def test_an_entity_on_most_facts_says_nothing_about_which_matter() -> None:
    """The user's own name is on many facts: it must not lift them all."""
    facts = [("maya", f"thing{i}") for i in range(30)] + [("lisbon",)]
    index = EntityIndex(facts)
    assert "maya" not in index.postings
    bonus, names = index.bonus("Maya's trip to Lisbon")
    assert names == ["lisbon"] and bonus[-1] == 1.0 and bonus[:-1].sum() == 0


def test_rarer_entities_weigh_more_in_the_bonus() -> None:
    facts = [("go", "lyon")] + [("go",)] * 4 + [()] * 200
    bonus, _ = EntityIndex(facts).bonus("Go in Lyon")
    assert bonus[0] == pytest.approx(1.0)
    assert 0 < bonus[1] < 0.5  # "go" is on 5 facts, "lyon" on one


# -- entities from the extraction ----------------------------------------------------------------


def test_the_schema_offers_an_entities_list_and_new_facts_keep_it() -> None:
    item = update_json_schema()["properties"]["newFacts"]["items"]
    assert item["properties"]["entities"]["type"] == "array"
    update = MemoryUpdate.model_validate(
        {
            "newFacts": [
                {
                    "content": "Runs the team's clusters on k8s",
                    "confidence": 0.9,
                    "entities": ["Kubernetes", " kubernetes ", 7, None, "", "K8s"],
                },
                {"content": "Likes tea", "confidence": 0.9, "entities": "Assam"},
                {"content": "Likes jazz", "confidence": 0.9, "entities": {"odd": 1}},
            ]
        }
    )
    assert [f.entities for f in update.newFacts] == [("kubernetes", "k8s"), ("assam",), ()]
    memory, _ = apply_update(Memory(), update, now=NOW, threshold=0.7, max_facts=100)
    assert memory.facts[0].entities == ("kubernetes", "k8s")
    stored = memory.to_json_dict()["facts"]
    assert stored[0]["entities"] == ["kubernetes", "k8s"]
    assert "entities" not in stored[2]  # left out when empty: files stay DeerFlow-shaped
    assert Memory.from_json_dict(json.loads(json.dumps(memory.to_json_dict()))) == memory


def test_a_restated_fact_gains_the_new_entities_capped() -> None:
    first = MemoryUpdate.model_validate(
        {"newFacts": [{"content": "Uses Go at work", "confidence": 0.9, "entities": ["go"]}]}
    )
    memory, _ = apply_update(Memory(), first, now=NOW, threshold=0.7, max_facts=100)
    names = [f"tool{i}" for i in range(20)]
    again = MemoryUpdate.model_validate(
        {"newFacts": [{"content": "Uses Go at work", "confidence": 0.9, "entities": names}]}
    )
    memory, report = apply_update(memory, again, now=NOW, threshold=0.7, max_facts=100)
    assert report.facts.reinforced and len(memory.facts) == 1
    entities = memory.facts[0].entities
    assert entities[0] == "go" and len(entities) == MAX_ENTITIES


def test_hostile_entities_in_a_stored_file_never_fail_loading() -> None:
    fact = Fact.model_validate(
        {"id": "f", "content": "x", "entities": ["A" * 500, "\ud800b", 1e400, ["n"], "ok"]}
    )
    assert fact.entities[0] == "a" * 60 and fact.entities[-1] == "ok"
    assert all(isinstance(e, str) for e in fact.entities)


# -- the entity route in selection ---------------------------------------------------------------


def _noise(n: int) -> list[Fact]:
    topics = ["tea", "jazz", "chess", "running", "baking", "cycling", "poetry", "sailing"]
    return [make_fact(f"n{i}", f"Enjoys {topics[i % 8]} on weekends number {i}") for i in range(n)]


def test_the_entity_route_finds_a_fact_by_the_name_the_extraction_listed() -> None:
    target = make_fact("k8s", "Runs the team's clusters on k8s", entities=("kubernetes",))
    memory = Memory(facts=(*_noise(40), target))
    message = "any tips for kubernetes upgrades?"
    on = FactSelector(SelectionParams(top_k=3), clock=lambda: NOW)
    off = FactSelector(SelectionParams(top_k=3, entity_weight=0.0), clock=lambda: NOW)
    assert "k8s" not in [s.fact.id for s in off.select("a", memory, message)]
    picked = on.select("a", memory, message)
    assert picked[0].fact.id == "k8s"
    assert picked[0].entity == 1.0
    assert dict(picked[0].routes)["entity"] == 1.0


# -- the rule route ------------------------------------------------------------------------------


RULES = [
    {
        "name": "deployment",
        "match": "deploy|release|部署|上线",
        "categories": ["preference"],
        "topics": ["deploy", "release", "friday", "部署", "发布"],
    }
]


def _rule_memory() -> Memory:
    return Memory(
        facts=(
            *_noise(40),
            make_fact("fri", "Never ships anything on Fridays", category="preference"),
            make_fact("bg", "Wants blue-green releases with a manual gate", category="preference"),
            make_fact("zh", "部署前一定要先跑完集成测试", category="preference"),
            make_fact("ctx", "Deployed the billing service last May", category="context"),
        )
    )


@pytest.mark.parametrize("message", ["can you deploy the api now?", "帮我把服务部署到生产环境"])
def test_a_matching_rule_recalls_its_facts_first(message: str) -> None:
    params = SelectionParams(top_k=5, recall_rules=recall_rules_from_config(RULES))
    picked = FactSelector(params, clock=lambda: NOW).select("a", _rule_memory(), message)
    ids = [s.fact.id for s in picked]
    # "fri" matches the topic "friday"; "ctx" is not a preference
    assert set(ids[:3]) == {"fri", "bg", "zh"}
    assert "ctx" not in ids[:3]
    for scored in picked[:3]:
        assert scored.rule == "deployment" and dict(scored.routes)["rule"] == 1.0


def test_a_rule_that_does_not_match_changes_nothing() -> None:
    message = "what should I bake this weekend?"
    plain = FactSelector(SelectionParams(top_k=5), clock=lambda: NOW)
    ruled = FactSelector(
        SelectionParams(top_k=5, recall_rules=recall_rules_from_config(RULES)), clock=lambda: NOW
    )
    memory = _rule_memory()
    before = [(s.fact.id, s.score) for s in plain.select("a", memory, message)]
    after = ruled.select("a", memory, message)
    assert [(s.fact.id, s.score) for s in after] == before
    assert all(s.rule is None for s in after)


def test_recall_rules_from_yaml_reach_the_selection(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        textwrap.dedent(
            """
            memory:
              recall_rules:
                - name: deployment
                  match: [deploy, 部署]
                  categories: [preference]
                - match: "\\\\bvisa\\\\b"
                  topics: passport|visa
            """
        ),
        encoding="utf-8",
    )
    config = MemoryConfig.from_yaml(path)
    rules = SelectionParams.from_config(config).recall_rules
    assert [r.name for r in rules] == ["deployment", "rule 2"]
    assert rules[0].applies("Please DEPLOY it") and rules[0].applies("部署一下")
    assert rules[1].applies("my visa expires") and not rules[1].applies("visage")


@pytest.mark.parametrize(
    ("rule", "key", "says"),
    [
        ("- match: '(unclosed'\n      categories: [goal]", "match", "invalid regular expression"),
        ("- match: deploy", "recall_rules.0", "give categories or topics"),
        ("- match: ''\n      categories: [goal]", "match", "empty pattern"),
        ("- match: deploy\n      topics: '[x'", "topics", "invalid regular expression"),
        ("- match: deploy\n      categories: [goal]\n      colour: red", "colour", "unknown key"),
    ],
)
def test_a_bad_rule_is_a_config_error_naming_file_line_and_key(
    tmp_path: Path, rule: str, key: str, says: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"memory:\n  recall_rules:\n    {rule}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        MemoryConfig.from_yaml(path)
    message = str(info.value)
    assert f"{path}:3" in message or f"{path}:4" in message or f"{path}:5" in message
    assert "memory.recall_rules.0" in message and key in message and says in message


# -- explain and the ledger show the routes ------------------------------------------------------


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[MemoryService, MemoryScope]]:
    made = MemoryService(memory_config(tmp_path, top_k=5, recall_rules=RULES))
    scope = made.scope("alice")
    made._storage.save(scope, _rule_memory(), 0)
    yield made, scope
    made.close()


def test_explain_shows_the_rules_and_each_facts_routes(service: Any) -> None:
    made, scope = service
    report = made.explain_report(scope, "ready to deploy the api on friday?")
    assert report["recallRules"] == [
        {
            "name": "deployment",
            "rule": "deployment: /deploy|release|部署|上线/ → preference facts mentioning "
            "/deploy|release|friday|部署|发布/",
            "applies": True,
        }
    ]
    assert "+ 1.00 × rule" in report["formula"]
    rows = {r["id"]: r for r in report["facts"]}
    assert rows["fri"]["rule"] == "deployment"
    assert rows["fri"]["routes"]["rule"] == 1.0 and rows["fri"]["routes"]["lexical"] > 0
    assert rows["ctx"]["rule"] is None and "rule" not in rows["ctx"]["routes"]
    assert json.loads(json.dumps(report)) == report
    quiet = made.explain_report(scope, "what should I bake?")
    assert quiet["recallRules"][0]["applies"] is False
    assert all(r["rule"] is None for r in quiet["facts"])


def test_explain_names_the_messages_entities(tmp_path: Path) -> None:
    made = MemoryService(memory_config(tmp_path))
    scope = made.scope("alice")
    made._storage.save(
        scope,
        Memory(facts=(*_noise(30), make_fact("lis", "Spent a month in Lisbon"))),
        0,
    )
    try:
        report = made.explain_report(scope, "what did I do in lisbon?")
    finally:
        made.close()
    assert report["entityRoute"] == {"entities": ["lisbon"], "weight": 0.1}
    row = next(r for r in report["facts"] if r["id"] == "lis")
    assert row["entity"] == 1.0 and row["routes"]["entity"] == 1.0


def test_the_ledger_records_which_routes_found_each_injected_fact(tmp_path: Path) -> None:
    config = memory_config(tmp_path, top_k=5, recall_rules=RULES)
    mw = MemoryMiddleware(config=config)
    scope = mw.scope("alice")
    mw.service._storage.save(
        scope,
        _rule_memory().model_copy(
            update={
                "facts": (
                    *_rule_memory().facts,
                    make_fact("sam", "Call me Sam", category="correction"),
                )
            }
        ),
        0,
    )
    try:
        rendered = mw.explain_memory([HumanMessage("deploy it on friday")], user_id="alice")
        mw.service._record_injection(scope, rendered)
        record = mw.ledger[-1]
    finally:
        mw.close()
    routes = {f.fact_id: dict(f.routes) for f in record.facts}
    assert routes["fri"]["rule"] == 1.0 and routes["fri"]["lexical"] > 0
    assert routes["sam"] == {"guaranteed": 1.0}
    assert all(routes[i] for i in routes)  # every injected fact says what found it


def test_routes_name_the_channels_that_rank_a_fact_within_top_k() -> None:
    memory = Memory(facts=(*_noise(40), make_fact("go", "Writes backend services in Go")))
    picked = FactSelector(SelectionParams(top_k=3), clock=lambda: NOW).select(
        "a", memory, "which language for backend services?"
    )
    top = picked[0]
    assert top.fact.id == "go"
    assert dict(top.routes)["lexical"] == pytest.approx(top.lexical)
    assert "semantic" not in dict(top.routes)  # no embedding channel configured
    # a pick that only the sum of small bonuses placed has no channel route
    weak = [s for s in picked if s.lexical == 0]
    for scored in weak:
        assert "lexical" not in dict(scored.routes)


def test_seed_selection_reports_no_routes() -> None:
    memory = Memory(facts=(make_fact("go", "Writes Go"),))
    params = dataclasses.replace(SelectionParams.seed(), top_k=1)
    assert FactSelector(params).select("a", memory, "Go?")[0].routes == ()


# -- the semantic channel: hubs and near-duplicates ----------------------------------------------


def _unit(*values: float) -> list[float]:
    vector = np.array(values, dtype=np.float64)
    return (vector / np.linalg.norm(vector)).tolist()


def test_a_generic_fact_near_the_memorys_mean_no_longer_wins_every_question() -> None:
    """Facts near the mean of all fact vectors ("asks how things are going") are close to any
    question; the hub penalty scores the question against what is particular to each fact."""
    generic = [make_fact(f"g{i}", f"generic {i}") for i in range(10)]
    target = make_fact("t", "particular")
    index = FactIndex([*generic, target])
    index.dense = np.array(
        [_unit(1.0, 0.05 * (i % 3), 0.05 * (i % 2)) for i in range(10)] + [_unit(0.6, 0.8, 0.0)]
    )
    query = SelectionQuery("q")
    vector = np.array(_unit(0.9, 0.436, 0.0))
    plain = SelectionParams(lexical_weight=0.0, hub_weight=0.0, confidence_weight=0.0)
    dehubbed = dataclasses.replace(plain, hub_weight=0.6)
    assert rank(index, score_facts(index, query, plain, primary_vector=vector).score, 1) != [10]
    parts = score_facts(index, query, dehubbed, primary_vector=vector)
    assert rank(index, parts.score, 1) == [10]
    assert parts.semantic is not None and parts.semantic[10] == pytest.approx(
        vector @ index.dense[10]
    )


def test_near_duplicate_picks_make_room_for_a_different_fact() -> None:
    facts = [make_fact(f"d{i}", f"dup {i}") for i in range(3)] + [make_fact("other", "other")]
    index = FactIndex(facts)
    index.dense = np.array(
        [_unit(1.0, 0.0), _unit(1.0, 0.01), _unit(1.0, 0.02), _unit(0.5, 0.866)], dtype=np.float64
    )
    scores = np.array([1.0, 0.99, 0.98, 0.97])
    assert rank(index, scores, 2) == [0, 1]
    assert rank_diverse(index, scores, 2, threshold=0.92, penalty=0.03) == [0, 3]
    # a penalty too small to matter, or the demotion off, keeps the plain order
    assert rank_diverse(index, scores, 2, threshold=0.92, penalty=0.0) == [0, 1]
    assert rank_diverse(index, scores, 2, threshold=1.0, penalty=0.03) == [0, 1]
    index.dense = None
    assert rank_diverse(index, scores, 2, threshold=0.92, penalty=0.03) == [0, 1]
