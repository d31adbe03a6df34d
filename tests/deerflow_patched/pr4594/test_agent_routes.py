"""DeerFlow PR #4594 end to end: the Memory page's routes per agent, on our backend.

With the pull request every memory route of DeerFlow's gateway takes ``?agent_name=``: the
summaries it shows are the user's whatever the agent, the facts are the named agent's (none
named: the default agent's). Here DeerFlow's factory builds our backend from DeerFlow's
``config.yaml`` and every call goes through DeerFlow's patched router behind its
``AuthMiddleware``, as one of DeerFlow's IM channel workers reaches it for a user.
"""

from __future__ import annotations

from typing import Any

from tests.deerflow_host.conftest import DeerFlowHost
from tests.deerflow_host.test_real_deerflow import manager_mode

USER = "kim"
AGENT = "coding-agent"


def _fact(content: str) -> dict[str, Any]:
    return {"content": content, "category": "context", "confidence": 0.9}


def test_routes_per_agent_share_the_summaries_and_keep_the_facts_apart(
    deerflow_host: DeerFlowHost,
) -> None:
    host = deerflow_host
    manager_mode(host)
    headers = host.as_user(USER)
    agent = {"agent_name": AGENT}
    with host.gateway() as gateway:

        def call(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
            response = gateway.request(method, path, headers=headers, **kwargs)
            assert response.status_code == 200, f"{method} {path}: {response.text}"
            data: dict[str, Any] = response.json()
            return data

        call("POST", "/api/memory/facts", json=_fact("Kim drinks green tea"))
        call("POST", "/api/memory/facts", params=agent, json=_fact("Kim uses cargo-nextest"))
        backup = {
            "version": "1.0",
            "user": {"workContext": {"summary": "Kim ports services to Rust", "updatedAt": ""}},
            "facts": [{"id": "fact_kim_rust", "content": "Kim writes Rust", "confidence": 0.9}],
        }
        imported = call("POST", "/api/memory/import", params=agent, json=backup)
        assert [f["content"] for f in imported["facts"]] == ["Kim writes Rust"]  # replaced

        default = call("GET", "/api/memory")
        mine = call("GET", "/api/memory", params=agent)
        assert [f["content"] for f in default["facts"]] == ["Kim drinks green tea"]
        assert [f["content"] for f in mine["facts"]] == ["Kim writes Rust"]
        for memory in (default, mine):  # the import's summaries are the user's
            assert memory["user"]["workContext"]["summary"] == "Kim ports services to Rust"
        assert call("GET", "/api/memory/export", params=agent)["facts"] == mine["facts"]

        wrong = gateway.patch(
            "/api/memory/facts/fact_kim_rust", headers=headers, json={"content": "hijacked"}
        )
        assert wrong.status_code == 404  # the default agent has no such fact

        cleared = call("DELETE", "/api/memory", params=agent)
        assert cleared["facts"] == []
        assert cleared["user"]["workContext"]["summary"] == "Kim ports services to Rust"
        default = call("GET", "/api/memory")
        assert [f["content"] for f in default["facts"]] == ["Kim drinks green tea"]

        call("DELETE", "/api/memory")  # no agent: all of Kim's memory
        for params in ({}, agent):
            memory = call("GET", "/api/memory", params=params)
            assert memory["facts"] == []
            assert memory["user"]["workContext"]["summary"] == ""
    host.assert_deerflow_files_untouched()
