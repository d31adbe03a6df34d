"""DeerFlow PR #4885 end to end: its batch fact routes, behind its ``AuthMiddleware``, on our
backend. DeerFlow's own tests of these routes use a mock manager; here the router calls ours,
and a batch is all or nothing: one unknown id (404) or one bad value changes no fact."""

from __future__ import annotations

from typing import Any

from tests.deerflow_host.conftest import DeerFlowHost

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
USER = "maya"
FACTS = (
    "Maya drinks green tea in the morning",
    "Maya runs along the river at dawn",
    "Maya reads science fiction on the train",
)


def test_batch_routes_change_all_facts_or_none(deerflow_host: DeerFlowHost) -> None:
    host = deerflow_host
    host.write_config({"manager_class": MANAGER_CLASS, "backend_config": {"embeddings": "none"}})
    host.memory_manager()
    maya = host.as_user(USER)
    with host.gateway() as gateway:
        ids = []
        for content in FACTS:
            response = gateway.post(
                "/api/memory/facts",
                json={"content": content, "category": "context", "confidence": 0.5},
                headers=maya,
            )
            assert response.status_code == 200, response.text
            ids.append(next(f["id"] for f in response.json()["facts"] if f["content"] == content))

        def memory() -> dict[str, Any]:
            return dict(gateway.get("/api/memory", headers=maya).json())

        before = memory()
        for path, body, status in (
            (
                "batch",
                {
                    "updates": [
                        {"fact_id": ids[0], "confidence": 0.9},
                        {"fact_id": "fact_gone", "confidence": 0.9},
                    ]
                },
                404,
            ),
            (
                "batch",
                {
                    "updates": [
                        {"fact_id": ids[0], "confidence": 0.9},
                        {"fact_id": ids[1], "confidence": 1.5},
                    ]
                },
                422,
            ),
            ("batch", {"updates": [{"fact_id": ids[0], "content": FACTS[1]}]}, 409),
            ("batch", {"updates": [{"fact_id": ids[0]}] * 101}, 422),
            ("batch-delete", {"fact_ids": [ids[0], "fact_gone"]}, 404),
            ("batch-delete", {"fact_ids": []}, 422),
        ):
            response = gateway.post(f"/api/memory/facts/{path}", json=body, headers=maya)
            assert response.status_code == status, (path, body, response.text)
            assert memory()["facts"] == before["facts"], (path, body)

        response = gateway.post(
            "/api/memory/facts/batch",
            json={
                "updates": [
                    {"fact_id": ids[0], "content": "Maya drinks oolong tea"},
                    {"fact_id": ids[1], "category": "habit", "confidence": 0.9},
                ]
            },
            headers=maya,
        )
        assert response.status_code == 200, response.text
        facts = {f["id"]: f for f in response.json()["facts"]}
        assert facts[ids[0]]["content"] == "Maya drinks oolong tea"
        assert (facts[ids[1]]["category"], facts[ids[1]]["confidence"]) == ("habit", 0.9)
        assert [f["id"] for f in response.json()["facts"]] == sorted(ids)  # as DeerMem lists

        response = gateway.post(
            "/api/memory/facts/batch-delete", json={"fact_ids": ids[:2]}, headers=maya
        )
        assert response.status_code == 200, response.text
        assert [f["id"] for f in response.json()["facts"]] == [ids[2]]
        assert [f["id"] for f in memory()["facts"]] == [ids[2]]
