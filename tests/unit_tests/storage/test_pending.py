"""How a journal entry changes hands between replicas (``storage/pending.py``, pure)."""

from __future__ import annotations

import json

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage import MemoryScope
from deermem_middleware.storage.pending import (
    LEGACY_ORPHAN_SECONDS,
    Claim,
    JournalEntry,
    Owner,
    captured,
    claimed,
    engine_identity,
    me,
    released,
    renewed,
    with_turns,
)
from tests.helpers import dead_pid

SCOPE = MemoryScope("alice", "coder")
ELSEWHERE_A = Owner("pod-a", 7, "aaaa.1")
ELSEWHERE_B = Owner("pod-b", 7, "bbbb.1")


def turns(*texts: str) -> tuple[Turn, ...]:
    return tuple(Turn("user", t, f"fp-{t}") for t in texts)


def entry(owner: Owner, created: float, *texts: str, expires_in: float = 60.0) -> JournalEntry:
    return JournalEntry.mine(
        SCOPE, "t1", turns(*texts), expires_in=expires_in, now=created, owner=owner
    )


def test_a_capture_keeps_the_oldest_pending_time_and_a_claim_in_force() -> None:
    old = entry(ELSEWHERE_A, 100.0, "a")
    new = entry(ELSEWHERE_B, 130.0, "a", "b")
    assert captured(None, new) == new
    merged = captured(old, new)
    assert (merged.owner, merged.turns, merged.created) == (ELSEWHERE_B, new.turns, 130.0)
    assert merged.since == 100.0  # max_wait counts from the oldest pending capture
    running = claimed(old, ELSEWHERE_A, now=110.0, lease=30.0)
    during = captured(running, new)
    assert during.claim == running.claim  # the run in progress stays in force
    assert during.since == 130.0  # the claimed run covers the older turns: a new burst
    assert during.orphan_at == 140.0  # its holder renews it, or anyone takes it then


def test_claims_renew_release_and_hand_over() -> None:
    e = entry(ELSEWHERE_A, 100.0, "a")
    c = claimed(e, ELSEWHERE_B, now=105.0, lease=30.0)
    assert c.claim == Claim("bbbb.1", "pod-b", 7, 135.0) and c.orphan_at == 135.0
    assert renewed(c, ELSEWHERE_B, now=150.0, lease=30.0).orphan_at == 180.0
    free = released(c)
    assert free.claim is None and free.expires == e.expires
    handed = released(c, now=120.0)
    assert handed.claim is None and handed.orphan_at == 120.0
    assert with_turns(e, turns("x", "a")).turns == turns("x", "a")


def test_who_may_take_an_entry_over() -> None:
    mine = me()
    e = entry(ELSEWHERE_A, 100.0, "a")  # another machine: judged by its expiry only
    assert not e.takeable(mine, 150.0, orphan_after_seconds=600)
    assert e.takeable(mine, 161.0, orphan_after_seconds=600)
    held = claimed(e, ELSEWHERE_B, now=150.0, lease=30.0)
    assert not held.takeable(mine, 170.0, orphan_after_seconds=600)  # renewed: in force
    assert held.takeable(mine, 181.0, orphan_after_seconds=600)  # not renewed: abandoned
    ours = claimed(e, mine, now=150.0, lease=30.0)
    assert ours.takeable(mine, 500.0, orphan_after_seconds=600)
    own = entry(mine, 100.0, "a")
    assert not own.takeable(mine, 1e9, orphan_after_seconds=600)  # our own timer runs it


def test_a_dead_process_here_is_gone_at_once_and_a_paused_one_after_its_lease() -> None:
    dead = Owner(me().host, dead_pid(), "dddd")
    assert entry(dead, 100.0, "a").takeable(me(), 100.5, orphan_after_seconds=600)
    claim = claimed(entry(ELSEWHERE_A, 100.0, "a"), dead, now=100.0, lease=30.0)
    assert claim.takeable(me(), 101.0, orphan_after_seconds=600)  # its holder is dead
    # a live process of this machine (paused, stalled) is taken over once its lease ran out
    alive = engine_identity("other-engine")
    stalled = entry(alive, 100.0, "a", expires_in=10.0)
    assert not stalled.takeable(me(), 105.0, orphan_after_seconds=600)
    assert stalled.takeable(me(), 111.0, orphan_after_seconds=600)


def test_engines_of_one_process_are_alive_together_and_predecessors_are_gone() -> None:
    one, two = engine_identity("e1"), engine_identity("e2")
    assert one.process == two.process and one != two
    assert one.is_gone(two) is False
    predecessor = Owner(one.host, one.pid, "0" * 16 + ".e1")  # the same pid, another process
    assert predecessor.is_gone(two) is True
    assert ELSEWHERE_A.is_gone(one) is None


def test_entries_written_before_they_expired_follow_the_old_rule() -> None:
    legacy = JournalEntry(SCOPE, "t1", turns("a"), "pod-a", 1, created=1000.0)
    assert legacy.orphan_at == 1000.0 + LEGACY_ORPHAN_SECONDS
    assert not legacy.owner_is_gone(600, now=1500.0)
    assert legacy.owner_is_gone(600, now=1700.0)
    here = JournalEntry(SCOPE, "t1", turns("a"), me().host, me().pid, 0.0, me().run)
    assert not here.owner_is_gone(600, now=1e9)  # a live process here does it


def test_entries_round_trip_through_json() -> None:
    e = claimed(entry(ELSEWHERE_A, 100.0, "a", "b"), ELSEWHERE_B, now=101.0, lease=30.0)
    e = JournalEntry(**{**{f: getattr(e, f) for f in e.__slots__}, "version": "v1"})
    data = json.loads(json.dumps(e.to_json()))
    assert data["orphan_at"] == e.orphan_at and data["v"] == "v1"
    assert JournalEntry.from_json(data) == e
    old = {k: v for k, v in data.items() if k not in ("first", "expires", "claim", "v")}
    legacy = JournalEntry.from_json(old)
    assert legacy.claim is None and legacy.expires is None and legacy.version == ""
