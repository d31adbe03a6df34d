"""DeerFlow's per-agent buckets as the gateway's calls change them (:mod:`.deerflow.buckets`)."""

from __future__ import annotations

from deermem_middleware.deerflow.buckets import facts_cleared
from deermem_middleware.memory.document import (
    CarriedOver,
    Fact,
    Memory,
    Section,
    TrimCount,
    UserContext,
    Watermark,
)

NOW = "2026-06-01T00:00:00Z"


def test_clearing_one_agent_keeps_the_users_summaries_and_its_threads_progress() -> None:
    memory = Memory(
        user=UserContext(workContext=Section(summary="Shared", updatedAt=NOW)),
        facts=(Fact(id="fact_1", content="Uses Rust"),),
        watermarks={"t-1": Watermark(turn="abc", count=3)},
        trimmed=TrimCount(count=2),
        carriedOver=CarriedOver(at=NOW, facts=1),
    )
    cleared = facts_cleared(memory, NOW)
    assert cleared.facts == () and cleared.trimmed is None
    assert cleared.user.workContext.summary == "Shared"
    assert cleared.watermarks == memory.watermarks
    assert cleared.carriedOver == memory.carriedOver
    assert cleared.lastUpdated == NOW


def test_nothing_to_clear_is_no_change() -> None:
    memory = Memory(user=UserContext(workContext=Section(summary="Shared", updatedAt=NOW)))
    assert facts_cleared(memory, NOW) is memory
