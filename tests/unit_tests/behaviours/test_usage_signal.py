"""The usage signal: which injected facts an answer used, counted per fact, in the score and in
``deermem stats`` — the estimate on its own, then through real ``create_agent`` runs and a
hand-built graph (fake chat models; the graph, checkpointer and middleware are real)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from deermem_middleware import MemoryConfig, MemoryMiddleware, MemoryNodes, MemoryState
from deermem_middleware.cli import main
from deermem_middleware.config import ConfigError
from deermem_middleware.formats.repair import repair_document
from deermem_middleware.injection.render import RenderedMemory
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.memory.usage import (
    USAGE_MIN_OVERLAP,
    USAGE_PRIOR,
    access_frequency,
    content_units,
    estimate_use,
    turn_answer,
)
from deermem_middleware.retrieval.scoring import ScoredFact
from deermem_middleware.retrieval.selector import FactSelector, SelectionParams
from deermem_middleware.runtime import ledger as ledger_module
from deermem_middleware.runtime.ledger import InjectionLedger
from deermem_middleware.runtime.stats import describe_hit_rate, scope_stats
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.testing import RecordingAgentModel, ScriptedChatModel, update_json
from tests.helpers import make_fact

PEANUTS = "The user is allergic to peanuts"
BERLIN = "The user lives in Berlin with two cats"
SCOPE = MemoryScope("alice", "__default__")


# -- the estimate (pure) ----------------------------------------------------------------------


def test_content_units_ignore_stopwords_and_the_generic_subject() -> None:
    assert content_units("The user is allergic to peanuts") == {"aller", "peanu"}
    assert content_units("User likes tea.") == {"tea"}
    # word forms meet at their first five letters; short numbers are not content
    assert content_units("painting paints painted") == {"paint"}
    assert content_units("since 2021, 3 times") == {"2021", "times"}
    assert content_units("the user and them") == frozenset()


def test_content_units_of_chinese_and_japanese() -> None:
    # 用户 and 喜欢 are the frame, not the content: what is left is 喝乌龙茶
    assert content_units("用户喜欢喝乌龙茶") == {"喝", "乌", "龙", "茶", "喝乌", "乌龙", "龙茶"}
    # split at particles; a pair of hiragana is grammar
    units = content_units("ユーザーは猫を飼っている")
    assert "猫" in units and "いる" not in units and "って" not in units


def test_an_answer_that_restates_a_fact_used_it() -> None:
    facts = [("p", PEANUTS), ("b", BERLIN), ("t", "The user prefers green tea")]
    uses = estimate_use("Since you have a peanut allergy, skip the satay sauce.", facts)
    assert [u.fact_id for u in uses] == ["p"]
    assert uses[0].overlap == 1.0 and uses[0].shared == 2


def test_one_common_word_is_not_a_use() -> None:
    fact = [("b", "The user lives in Berlin and works at a robotics startup")]
    assert estimate_use("Berlin has great museums; try the Pergamon.", fact) == []
    answer = "You live in Berlin and work at a robotics startup, so Kreuzberg is close."
    assert [u.fact_id for u in estimate_use(answer, fact)] == ["b"]


def test_a_short_answer_used_the_fact_that_holds_it() -> None:
    fact = [("s", "User moved from Sweden four years ago")]
    assert [u.fact_id for u in estimate_use("Sweden", fact)] == ["s"]
    assert estimate_use("Norway", fact) == []


def test_chinese_answer_uses_a_chinese_fact() -> None:
    facts = [("t", "用户喜欢喝乌龙茶"), ("c", "用户住在柏林")]
    uses = estimate_use("推荐你试试乌龙茶，很适合你。", facts)
    assert [u.fact_id for u in uses] == ["t"]
    assert estimate_use("你的猫怎么样？", [("k", "用户养了一只猫")]) == []


def test_threshold_duplicates_and_empty_answers() -> None:
    facts = [("p", PEANUTS), ("p", PEANUTS)]
    assert len(estimate_use("peanut allergy", facts)) == 1  # listed twice, counted once
    half = [("b", BERLIN)]  # units: lives, berli, cats; the answer repeats two of three
    assert estimate_use("Berlin is great for cats", half, min_overlap=0.6)
    assert not estimate_use("Berlin is great for cats", half, min_overlap=0.7)
    assert estimate_use("", facts) == [] and estimate_use("ok, thanks!", facts) == []


def test_turn_answer_is_the_ai_text_after_the_newest_user_message() -> None:
    messages = [
        HumanMessage("old question"),
        AIMessage("old answer about peanuts"),
        HumanMessage("Can I eat satay?"),
        AIMessage("You are allergic, let me check.", tool_calls=[_call("c1")]),
        ToolMessage("satay: peanut sauce", tool_call_id="c1"),
        AIMessage([{"type": "text", "text": "Skip it: peanut sauce."}]),
    ]
    assert turn_answer(messages) == "You are allergic, let me check.\nSkip it: peanut sauce."
    assert turn_answer([HumanMessage("hi")]) == ""
    assert turn_answer([]) == ""


def test_access_frequency_is_smoothed_and_clamped() -> None:
    facts = [
        make_fact("a", "x"),
        make_fact("b", "x", injections=1, used=1),
        make_fact("c", "x", injections=10, used=10),
        make_fact("d", "x", injections=10),
        make_fact("e", "x", injections=1, used=5),  # hand-edited: more uses than injections
    ]
    values = access_frequency(facts)
    assert values[0] == 0.0 and values[3] == 0.0
    assert values[1] == pytest.approx(1 / (1 + USAGE_PRIOR))
    assert values[2] == pytest.approx(10 / (10 + USAGE_PRIOR))
    assert values[4] == pytest.approx(5 / (5 + USAGE_PRIOR))
    assert (values < 1).all()
    assert access_frequency([]).shape == (0,)


# -- the document and the ledger --------------------------------------------------------------


def test_used_is_left_out_at_zero_and_round_trips() -> None:
    assert "used" not in Fact(id="f", content="x").model_dump()
    stored = Memory(facts=(make_fact("f", "x", injections=4, used=3),)).to_json_dict()
    assert stored["facts"][0]["used"] == 3
    assert Memory.from_json_dict(stored).facts[0].used == 3
    assert make_fact("f", "x", used=10**20).used == 10**9  # clamped like every count


def test_a_bad_used_count_is_repaired() -> None:
    raw = {"facts": [{"id": "f", "content": "x", "used": "many"}]}
    memory, report = repair_document(raw)
    assert memory.facts[0].used == 0
    assert any(r.field.endswith("used") for r in report.repairs)


def _rendered(*facts: Fact) -> RenderedMemory:
    return RenderedMemory(
        "<memory/>", tuple(ScoredFact(fact=f, score=1.0, relevance=1.0) for f in facts), (), 10
    )


def test_ledger_keeps_a_turns_facts_per_thread_and_folds_uses() -> None:
    ledger = InjectionLedger()
    peanuts, berlin = make_fact("p", PEANUTS), make_fact("b", BERLIN)
    ledger.record(SCOPE, _rendered(peanuts, berlin))  # two model calls of one turn
    ledger.record(SCOPE, _rendered(peanuts))
    assert sorted(ledger.take_turn(SCOPE, None)) == [("b", BERLIN), ("p", PEANUTS)]
    assert ledger.take_turn(SCOPE, None) == []  # taken: the next turn starts empty
    ledger.record_use(SCOPE, ["p", "p"])
    memory = ledger.annotate(SCOPE, Memory(facts=(peanuts, berlin)))
    by_id = {f.id: f for f in memory.facts}
    assert (by_id["p"].injections, by_id["p"].used) == (2, 1)
    assert (by_id["b"].injections, by_id["b"].used) == (1, 0)
    # uses alone (the injections were saved already) are folded too
    ledger.record_use(SCOPE, ["b"])
    assert {f.id: f.used for f in ledger.annotate(SCOPE, memory).facts} == {"p": 1, "b": 1}


def test_ledger_forgets_turns_that_never_got_an_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ledger_module.MAX_OPEN_TURNS == 4096
    monkeypatch.setattr(ledger_module, "MAX_OPEN_TURNS", 8)
    ledger = InjectionLedger()
    fact = make_fact("p", PEANUTS)
    for n in range(8 + 5):
        ledger.record(MemoryScope(f"u{n}", "__default__"), _rendered(fact))
    assert len(ledger._turns) == 8
    assert ledger.take_turn(MemoryScope("u0", "__default__"), None) == []


# -- the score ----------------------------------------------------------------------------------


def test_a_used_fact_ranks_above_an_equal_unused_one() -> None:
    twins = Memory(
        facts=(
            make_fact("a", "The user plays chess on Sundays", injections=5),
            make_fact("b", "The user plays chess on Sundays!", injections=5, used=5),
        )
    )
    picks = FactSelector(SelectionParams(usage_weight=0.05)).select("k", twins, "chess?")
    assert [p.fact.id for p in picks] == ["b", "a"]
    assert picks[0].usage == pytest.approx(5 / 7) and picks[1].usage == 0.0
    off = FactSelector(SelectionParams(usage_weight=0.0)).select("k", twins, "chess?")
    assert all(p.usage == 0.0 for p in off)
    by_id = {p.fact.id: p.score for p in off}
    assert picks[0].score == pytest.approx(by_id["b"] + 0.05 * 5 / 7)


def test_usage_weight_from_config() -> None:
    assert MemoryConfig().usage_min_overlap == USAGE_MIN_OVERLAP
    assert MemoryConfig().usage_weight == SelectionParams().usage_weight
    assert SelectionParams.from_config(MemoryConfig()).usage_weight == MemoryConfig().usage_weight
    assert SelectionParams.from_config(MemoryConfig(usage_weight=0.1)).usage_weight == 0.1
    assert SelectionParams.from_config(MemoryConfig(selection="seed")).usage_weight == 0.0
    with pytest.raises(ValueError, match="boolean"):
        MemoryConfig(usage_weight=True)
    with pytest.raises(ValueError):
        MemoryConfig(usage_min_overlap=0)


def test_usage_keys_load_from_yaml(tmp_path: Path) -> None:
    from deermem_middleware.config import load_memory_config

    path = tmp_path / "config.yaml"
    path.write_text("memory:\n  usage_weight: 0.1\n  usage_min_overlap: 0.7\n", "utf-8")
    config = load_memory_config(path)
    assert (config.usage_weight, config.usage_min_overlap) == (0.1, 0.7)
    path.write_text("memory:\n  usage_weight: lots\n", "utf-8")
    with pytest.raises(ConfigError, match="usage_weight"):
        load_memory_config(path)


# -- stats --------------------------------------------------------------------------------------


def test_stats_hit_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = JSONFileStorage(tmp_path / "mem")
    facts = (
        make_fact("a", "x", injections=30, used=15),
        make_fact("b", "y", injections=20, used=6),
    )
    storage.save(SCOPE, Memory(facts=facts), 0)
    item = scope_stats(storage, SCOPE, 0)
    assert (item["injections"], item["used"]) == (50, 21)
    assert item["hitRate"] == pytest.approx(0.42)
    assert describe_hit_rate(21, 50) == "hit rate 42 % (21 used / 50 injected)"
    assert describe_hit_rate(0, 0) == "hit rate n/a (nothing injected yet)"
    storage.save(MemoryScope("bob", "__default__"), Memory(facts=(make_fact("c", "z"),)), 0)
    assert scope_stats(storage, MemoryScope("bob", "__default__"), 0)["hitRate"] is None

    config = tmp_path / "config.yaml"
    config.write_text("memory:\n  storage_path: mem\n  embeddings: none\n", "utf-8")
    assert main(["stats", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "hit rate 42 % (21 used / 50 injected)" in out
    assert "hit rate n/a (nothing injected yet)" in out
    assert main(["stats", "--json", "--config", str(config)]) == 0
    items = {i["user"]: i for i in json.loads(capsys.readouterr().out)}
    assert items["alice"]["used"] == 21 and items["bob"]["hitRate"] is None


# -- through real graphs ------------------------------------------------------------------------


def _call(call_id: str) -> dict[str, Any]:
    return {"name": "lookup", "args": {"q": "satay"}, "id": call_id}


def _seeded(config: MemoryConfig) -> MemoryMiddleware:
    middleware = MemoryMiddleware(config, model=ScriptedChatModel(answers=[update_json()]))
    facts = (make_fact("fact_peanuts", PEANUTS), make_fact("fact_berlin", BERLIN))
    middleware.service._storage.save(SCOPE, Memory(facts=facts), 0)
    return middleware


def _agent(middleware: MemoryMiddleware, model: Any) -> Any:
    return create_agent(
        model, [], system_prompt="Be brief.", middleware=[middleware], checkpointer=InMemorySaver()
    )


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "alice"}}


def _counts(middleware: MemoryMiddleware) -> dict[str, tuple[int, int]]:
    return {f.id: (f.injections, f.used) for f in middleware.get_memory("alice").facts}


ANSWER = "Better not: satay sauce is made of peanuts, and you are allergic to them."


def test_usage_signal_through_a_create_agent_run(memory_config: MemoryConfig) -> None:
    middleware = _seeded(memory_config)
    model = RecordingAgentModel(answers=[ANSWER])
    agent = _agent(middleware, model)

    result = agent.invoke(
        {"messages": [HumanMessage("Can I eat satay? It has peanuts.")]}, _cfg("A")
    )
    assert result["messages"][-1].content == ANSWER
    assert PEANUTS in str(model.seen[-1][0].content)  # both facts were injected
    assert BERLIN in str(model.seen[-1][0].content)
    assert middleware.flush(timeout=10)
    assert _counts(middleware) == {"fact_peanuts": (1, 1), "fact_berlin": (1, 0)}

    item = scope_stats(middleware.service._storage, SCOPE, 0)
    assert (item["used"], item["injections"], item["hitRate"]) == (1, 2, 0.5)
    # the next selection sees the counts: the used fact carries its usage part
    picks = middleware.select_facts([HumanMessage("peanuts")], user_id="alice")
    assert {p.fact.id: p.usage for p in picks}["fact_peanuts"] == pytest.approx(1 / 3)
    middleware.close()


class _ToolLoopModel(GenericFakeChatModel):
    """LangChain's own fake chat model, able to be bound to tools (create_agent binds them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def lookup(q: str) -> str:
    """Look up a dish."""
    return "satay: grilled skewers with a peanut sauce"


async def test_usage_signal_through_ainvoke_with_a_tool_loop(memory_config: MemoryConfig) -> None:
    middleware = _seeded(memory_config)
    # two model calls in one turn (a tool call, then the answer), both injected: the turn's
    # answer is compared once with the facts of both calls
    model = _ToolLoopModel(
        messages=iter([AIMessage("", tool_calls=[_call("c1")]), AIMessage(ANSWER)] * 2)
    )
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
    for thread in ("A", "B"):
        result = await agent.ainvoke({"messages": [HumanMessage("Can I eat satay?")]}, _cfg(thread))
        assert isinstance(result["messages"][-2], ToolMessage)
        assert result["messages"][-1].content == ANSWER
    assert await middleware.aflush(timeout=10)
    # 2 turns × 2 model calls injected each fact 4 times; 2 answers used the peanuts fact
    assert _counts(middleware) == {"fact_peanuts": (4, 2), "fact_berlin": (4, 0)}
    await middleware.aclose()


def test_a_failing_estimate_never_fails_the_turn(
    memory_config: MemoryConfig,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from deermem_middleware.runtime import turns as service

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "estimate_use", broken)
    middleware = _seeded(memory_config)
    agent = _agent(middleware, RecordingAgentModel(answers=[ANSWER]))
    with caplog.at_level(logging.ERROR, logger="deermem_middleware"):
        result = agent.invoke({"messages": [HumanMessage("Can I eat satay?")]}, _cfg("A"))
    assert result["messages"][-1].content == ANSWER
    assert "estimating which memory facts the answer used failed" in caplog.text
    assert middleware.flush(timeout=10)
    # the capture still ran and the injections were still counted
    assert _counts(middleware) == {"fact_peanuts": (1, 0), "fact_berlin": (1, 0)}
    middleware.close()


def test_usage_signal_through_the_node_pair(memory_config: MemoryConfig) -> None:
    middleware = _seeded(memory_config)
    nodes = MemoryNodes(middleware)
    model = RecordingAgentModel(answers=[ANSWER])

    def call_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(nodes.with_memory(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("memory_inject", nodes.inject)
    builder.add_node("model", RunnableLambda(call_model))
    builder.add_node("memory_capture", nodes.capture)
    builder.add_edge(START, "memory_inject")
    builder.add_edge("memory_inject", "model")
    builder.add_edge("model", "memory_capture")
    builder.add_edge("memory_capture", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    graph.invoke({"messages": [HumanMessage("Can I eat satay?")]}, _cfg("N"))
    assert isinstance(model.seen[-1][0], SystemMessage)
    assert middleware.flush(timeout=10)
    assert _counts(middleware) == {"fact_peanuts": (1, 1), "fact_berlin": (1, 0)}
    middleware.close()


def test_usage_estimate_is_cheap() -> None:
    facts = [(f"f{i}", f"The user mentioned project {i} about kafka pipelines") for i in range(15)]
    answer = " ".join(f"Here is a long answer about topic {i} and kafka." for i in range(40))
    import time

    estimate_use(answer, facts)  # texts analysed once, then cached
    start = time.perf_counter()
    for _ in range(100):
        estimate_use(answer + " more", facts)
    per_call_ms = (time.perf_counter() - start) * 10
    assert per_call_ms < 5, per_call_ms
    assert np.isfinite(per_call_ms)
