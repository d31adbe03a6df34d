"""Captures of one thread within its debounce: a newer capture must not drop the turns of the
pending one it lacks.

A newer capture of a thread replaces the pending one — right when every capture holds the
whole conversation, wrong for a thread whose capture does not grow (no checkpointer, each call
capturing only its newest exchange; a history trimmed to a short window): three exchanges sent
within the debounce stored only the last. The pending capture's missing turns are now merged in
front of the newer one — in the scheduler's table, in the journal entry, and when a failed run
is backed off while a newer capture waits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deermem_middleware import MemoryMiddleware
from deermem_middleware.memory.conversation import Turn, merge_captures
from deermem_middleware.runtime.debounce import DebounceTable
from deermem_middleware.runtime.updater import MAX_MERGED_TURNS, CaptureJob, merge_jobs
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.testing import MarkerChatModel, RecordingAgentModel, marker_fact
from tests.helpers import KeepLastTwo, memory_config

SCOPE = MemoryScope("alice", "coder")
MARKERS = ("B1-C001", "B2-C002", "B3-C003")


def _turns(*fingerprints: str) -> tuple[Turn, ...]:
    roles = ("user", "assistant")
    return tuple(Turn(roles[i % 2], f"text {fp}", fp) for i, fp in enumerate(fingerprints))  # type: ignore[arg-type]


# -- the pure merge ------------------------------------------------------------------------------


def test_a_whole_history_capture_is_kept_as_it_is() -> None:
    older, newer = _turns("u1", "a1"), _turns("u1", "a1", "u2", "a2")
    assert merge_captures(older, newer, limit=100) == (newer, 0)


def test_disjoint_windows_are_joined_in_order() -> None:
    older, newer = _turns("u1", "a1"), _turns("u2", "a2")
    merged, cut = merge_captures(older, newer, limit=100)
    assert [t.fingerprint for t in merged] == ["u1", "a1", "u2", "a2"] and cut == 0


def test_overlapping_windows_keep_each_turn_once() -> None:
    older, newer = _turns("u1", "a1", "u2"), _turns("a1", "u2", "a2", "u3")
    merged, _ = merge_captures(older, newer, limit=100)
    assert [t.fingerprint for t in merged] == ["u1", "a1", "u2", "a2", "u3"]


def test_the_merge_is_bounded_by_dropping_the_oldest() -> None:
    older, newer = _turns(*(f"o{i}" for i in range(10))), _turns("n1", "n2")
    merged, cut = merge_captures(older, newer, limit=5)
    assert [t.fingerprint for t in merged] == ["o7", "o8", "o9", "n1", "n2"] and cut == 7


def test_jobs_merge_only_within_their_thread() -> None:
    first = CaptureJob(SCOPE, "t1", _turns("u1", "a1"))
    second = CaptureJob(SCOPE, "t1", _turns("u2", "a2"))
    assert [t.fingerprint for t in merge_jobs(first, second).turns] == ["u1", "a1", "u2", "a2"]
    assert merge_jobs(CaptureJob(SCOPE, "t0", first.turns), second) is second
    keyed = CaptureJob(SCOPE, "k", _turns("u2", "a2"), None, "conversation-key")
    assert merge_jobs(first, keyed) is keyed  # content-keyed jobs are never mixed
    whole = CaptureJob(SCOPE, "t1", _turns("u1", "a1", "u2", "a2"))
    assert merge_jobs(first, whole) is whole  # nothing missing: unchanged, no copy


def test_a_merged_job_is_extracted_afresh() -> None:
    failed = CaptureJob(SCOPE, "t1", _turns("u1", "a1"), extracted=object())  # type: ignore[arg-type]
    newer = CaptureJob(SCOPE, "t1", _turns("u2", "a2"))
    merged = merge_jobs(failed, newer)
    assert merged.extracted is None and len(merged.turns) == 4


def test_a_long_burst_stays_bounded() -> None:
    job = CaptureJob(SCOPE, "t1", _turns("u0", "a0"))
    for i in range(1, 200):
        job = merge_jobs(job, CaptureJob(SCOPE, "t1", _turns(f"u{i}", f"a{i}")))
    assert len(job.turns) == MAX_MERGED_TURNS
    assert job.turns[-1].fingerprint == "a199"


# -- the debounce table ---------------------------------------------------------------------------


def _join(older: list[str], newer: list[str]) -> list[str]:
    return older + [x for x in newer if x not in older]


def test_the_table_merges_a_submit_into_the_pending_payload() -> None:
    table: DebounceTable[str, list[str]] = DebounceTable(30, 120, merge=_join)
    table.submit("t", ["a"], 0.0)
    table.submit("t", ["b"], 1.0)
    assert table.pending("t") == ["a", "b"]
    assert [(k, p) for k, p, *_ in table.pop_due(100.0)] == [("t", ["a", "b"])]


def test_a_failed_run_backed_off_is_merged_with_the_newer_capture() -> None:
    table: DebounceTable[str, list[str]] = DebounceTable(30, 120, merge=_join)
    table.submit("t", ["b"], 1.0)  # captured while the run of ["a"] was in flight
    table.defer("t", ["a"], 2.0, not_before=10.0)  # ... which failed
    assert table.pending("t") == ["a", "b"]


def test_without_a_merge_the_newer_payload_replaces_the_pending_one() -> None:
    table: DebounceTable[str, list[str]] = DebounceTable(30, 120)
    table.submit("t", ["a"], 0.0)
    table.submit("t", ["b"], 1.0)
    assert table.pending("t") == ["b"]


# -- real agents, three turns within the debounce ------------------------------------------------


def _burst(agent: Any, mw: MemoryMiddleware) -> None:
    config = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
    for marker in MARKERS:  # no flush in between: all three within the hour of debounce
        agent.invoke({"messages": [HumanMessage(f"Please remember marker {marker}.")]}, config)
    assert mw.flush(timeout=10)


def _stored(mw: MemoryMiddleware) -> list[str]:
    return sorted(f.content for f in mw.get_memory("alice").facts)


def test_a_checkpointerless_burst_stores_every_exchange(tmp_path: Path) -> None:
    extractor = MarkerChatModel()
    mw = MemoryMiddleware(memory_config(tmp_path), model=extractor)
    _burst(create_agent(RecordingAgentModel(), [], middleware=[mw]), mw)
    assert _stored(mw) == sorted(marker_fact(m) for m in MARKERS)
    assert [call.conversation for call in extractor.calls] == [MARKERS]  # one call for the burst
    mw.close()


def test_a_windowed_burst_stores_every_exchange(tmp_path: Path) -> None:
    extractor = MarkerChatModel()
    mw = MemoryMiddleware(memory_config(tmp_path), model=extractor)
    agent = create_agent(
        RecordingAgentModel(), [], middleware=[mw, KeepLastTwo()], checkpointer=InMemorySaver()
    )
    _burst(agent, mw)
    assert _stored(mw) == sorted(marker_fact(m) for m in MARKERS)
    assert len(extractor.calls) == 1
    mw.close()


def test_the_journal_holds_the_merged_turns(tmp_path: Path) -> None:
    """A crash before the debounce ends replays the whole burst, not its last exchange."""
    config = memory_config(tmp_path)
    mw = MemoryMiddleware(config, model=MarkerChatModel())
    agent = create_agent(RecordingAgentModel(), [], middleware=[mw])
    cfg = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
    for marker in MARKERS:
        agent.invoke({"messages": [HumanMessage(f"Please remember marker {marker}.")]}, cfg)
    journal = FileJournal(Path(config.storage_path) / "pending")
    (entry,) = journal.entries()
    texts = [t.text for t in entry.turns if t.role == "user"]
    assert texts == [f"Please remember marker {m}." for m in MARKERS]
    mw.close()
