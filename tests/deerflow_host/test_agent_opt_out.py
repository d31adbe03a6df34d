"""A custom agent whose own ``config.yaml`` switches memory off, run by DeerFlow itself.

DeerFlow as pinned has no per-agent switch: its lead agent asks the backend for context and
hands it every finished turn whatever the agent's file says (pull request #4184, and the
``memory_enabled: false`` DeerFlow merged later as #5167, fold the switch in before the
backend is reached). So here the backend is what honours it: a real lead-agent turn of Kim's
custom agent ``stateless`` (``memory_enabled: false`` in
``users/kim/agents/stateless/config.yaml``, DeerFlow's own per-user agent folder) gets no
``<memory>`` block although Kim has a profile, and its turn is not captured; her agent ``coder``
(no switch) is given her memory.
"""

from __future__ import annotations

from typing import Any

import yaml
from langchain_core.messages import HumanMessage

from tests.deerflow_host.conftest import (
    DeerFlowHost,
    ManagerCalls,
)
from tests.deerflow_host.test_real_deerflow import manager_mode, memory_messages

USER = "kim"
WORK = "Kim builds data pipelines at a logistics company"
FACT = "Kim drinks green tea in the morning"


def _agent(host: DeerFlowHost, name: str, **extra: Any) -> None:
    folder = host.home / "users" / USER / "agents" / name
    folder.mkdir(parents=True)
    body = {"name": name, "description": f"Kim's {name} agent", **extra}
    (folder / "config.yaml").write_text(yaml.safe_dump(body), encoding="utf-8")


def test_an_agent_that_switched_memory_off_gets_none_and_leaves_none(
    deerflow_host: DeerFlowHost, manager_calls: ManagerCalls
) -> None:
    host = deerflow_host
    _agent(host, "stateless", memory_enabled=False)
    _agent(host, "coder")
    manager = manager_mode(host)
    backup = {
        "version": "1.0",
        "user": {"workContext": {"summary": WORK, "updatedAt": "2026-05-01T00:00:00Z"}},
        "facts": [],
    }
    manager.import_memory(backup, user_id=USER)  # Kim's profile: every agent's
    for agent in ("stateless", "coder"):
        manager.create_fact(FACT, "preference", 0.9, user_id=USER, agent_name=agent)
    before = manager.get_memory(user_id=USER, agent_name="stateless")

    turn = host.build_agent(USER, "thread-kim-stateless", agent_name="stateless").go(
        {"messages": [HumanMessage("Hi! I am Kim and I love hiking in the Alps.")]}
    )
    assert turn.model_calls and turn.answers, "the real model did not answer"
    # DeerFlow asked, for this agent, and got nothing to inject
    contexts = [c for c in manager_calls.of("get_context") if c.kwargs.get("agent_name")]
    assert [c.kwargs["agent_name"] for c in contexts] == ["stateless"]
    assert all(memory_messages(call) == [] for call in turn.model_calls)
    assert all(WORK not in str(m.content) for call in turn.model_calls for m in call)
    # DeerFlow handed the finished turn over; nothing was kept of it
    [capture] = manager_calls.of("aadd")  # DeerFlow's async path (it calls our add)
    assert capture.kwargs["agent_name"] == "stateless"
    assert host.shutdown_flush()
    assert manager.get_memory(user_id=USER, agent_name="stateless") == before

    # the agent without the switch is given Kim's memory
    given = manager.get_context(USER, agent_name="coder")
    assert WORK in given and FACT in given
    host.assert_deerflow_files_untouched()
