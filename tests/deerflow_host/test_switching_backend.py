"""Switching DeerFlow's memory backend to ours keeps the users' memory, on DeerFlow itself.

Two users have DeerFlow memory before the switch: Bob in a v1.0 per-user file
(``users/bob/memory.json``), Dana in HEAD's v2 layout (a summary-only ``memory.json`` and one
Markdown file per fact, with the ``.v1.bak`` HEAD's migration keeps). DeerFlow's
``config.yaml`` then names our backend. What DeerFlow's gateway lists and what its lead agent
gives the model are DeerFlow's own code at work (see ``conftest.py``); the files are our
fixtures in DeerFlow's shapes (``tests/fixtures/deerflow_memory``).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from tests.deerflow_host.conftest import DeerFlowHost
from tests.deerflow_host.test_real_deerflow import manager_mode, memory_messages

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "deerflow_memory"
CARRY_OVER_LOG = "deermem_middleware.storage.carry_over"
BOB = {"fact_b_rust", "fact_b_cat"}
DANA = {"fact_d_violin", "fact_d_tabs", "fact_d_manual", "fact_d_fix", "fact_d_old"}


def _contents(host: DeerFlowHost, user: str, ids: set[str]) -> dict[str, str]:
    """The contents of ``ids`` as DeerFlow's gateway lists them for ``user``."""
    with host.gateway() as gateway:
        response = gateway.get("/api/memory", headers=host.as_user(user))
    assert response.status_code == 200, response.text
    facts = {f["id"]: f["content"] for f in response.json()["facts"]}
    assert set(facts) == ids, f"{user}: {sorted(facts)}"
    return facts


def test_switching_backend_keeps_v1_and_v2_memory(
    deerflow_host: DeerFlowHost, caplog: pytest.LogCaptureFixture
) -> None:
    host = deerflow_host
    users = host.home / "users"
    shutil.copytree(FIXTURES / "v1-locations" / "users" / "bob", users / "bob")
    shutil.copytree(FIXTURES / "v2-markdown" / "users" / "dana", users / "dana")
    with caplog.at_level(logging.INFO, logger=CARRY_OVER_LOG):
        manager_mode(host)  # hashes DeerFlow's files, then starts DeerFlow on our backend
        bob = _contents(host, "bob", BOB)
        dana = _contents(host, "dana", DANA)
    carried = [r.getMessage() for r in caplog.records if r.name == CARRY_OVER_LOG]
    assert len(carried) == 2, carried
    assert "user 'bob' agent '__default__'" in carried[0] and "2 added" in carried[0]
    assert "user 'dana' agent '__default__'" in carried[1]

    # the next thread's model call has them (DeerFlow's get_context: no message, no thread)
    for user, facts in (("bob", bob), ("dana", dana)):
        turn = host.run_turn(user, f"thread-{user}-1", "Hello again!")
        [block] = memory_messages(turn.model_calls[0])
        for content in facts.values():
            assert content in block, f"{user}: {content!r} not injected"
    host.assert_deerflow_files_untouched()

    # a second start (a new gateway process) does not import again
    stored = json.loads((host.ours / "users" / "bob" / "__default__.json").read_text())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=CARRY_OVER_LOG):
        host.start()
        host.memory_manager()
        assert set(_contents(host, "bob", BOB)) == BOB
        assert set(_contents(host, "dana", DANA)) == DANA
    assert not [r for r in caplog.records if r.name == CARRY_OVER_LOG]
    again = json.loads((host.ours / "users" / "bob" / "__default__.json").read_text())
    assert again["carriedOver"] == stored["carriedOver"]
    assert [f["id"] for f in again["facts"]] == [f["id"] for f in stored["facts"]]
    host.assert_deerflow_files_untouched()
