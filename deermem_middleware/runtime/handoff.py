"""Who runs a thread's pending capture when a replica's debounce fires (pure).

Each replica debounces the captures it took; the journal entry of a thread is the thread's
newest capture, whichever replica took it (:mod:`deermem_middleware.storage.pending`). When a
replica's timer fires it reads the entry and :func:`decide` says what to do:

- **run** — there is no entry: the update is stored already (someone ran it) or the capture was
  never journaled (the storage was away); running is safe either way, since the thread's
  watermark skips turns already stored (no model call at all when nothing is new);
- **claim** — the entry is this replica's own newest capture, or the thread's debounce (or
  max-wait) has passed for everyone: claim it with compare-and-set and run it;
- **stand down** — somebody captured the thread after us and its debounce is still running (the
  newer capture's replica runs it when it fires), or another replica holds a claim on it;
- **wait** — our own newer capture arrived while another replica runs the older one: try again
  when that run ends (or its claim expires).

A flush (``forced``) claims whatever is not being run elsewhere, and waits for what is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from deermem_middleware.storage.pending import JournalEntry, Owner

__all__ = ["Decision", "Timing", "decide"]

Verdict = Literal["run", "claim", "stand_down", "wait"]


@dataclass(frozen=True, slots=True)
class Timing:
    """The debounce, the max-wait and the lease of an engine (seconds)."""

    debounce: float
    max_wait: float | None
    lease: float

    @property
    def expires_in(self) -> float:
        """How long after its capture an unclaimed entry waits for its owner: the debounce,
        then a lease (the owner's timer fires at the debounce and claims it at once)."""
        return self.debounce + self.lease

    def due(self, entry: JournalEntry) -> float:
        """When the thread's update is due for everyone: its debounce after its newest
        capture, or its max-wait after its oldest pending one."""
        due = entry.created + self.debounce
        if self.max_wait is not None:
            due = min(due, entry.since + self.max_wait)
        return due

    def poll(self, forced: bool) -> float:
        """How soon to look again at a thread another replica is running."""
        return 0.05 if forced else max(0.05, min(1.0, self.lease / 10))


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str
    delay: float = 0.0
    """``wait``: seconds until the next look."""


def decide(
    entry: JournalEntry | None,
    me: Owner,
    now: float,
    timing: Timing,
    *,
    forced: bool = False,
) -> Decision:
    """What the replica ``me`` does with a thread whose entry is ``entry``, its timer having
    fired at ``now`` (see the module docstring)."""
    if entry is None:
        return Decision("run", "no pending entry: stored already, or never journaled")
    claim = entry.claim
    if claim is not None and claim.held_by(me):
        return Decision("claim", "our claim")
    if claim is not None and claim.alive(me, now):
        if entry.owned_by(me) or forced:
            delay = min(max(claim.until - now, 0.0), timing.poll(forced))
            return Decision("wait", f"replica {claim.host}/{claim.pid} runs it", delay)
        return Decision("stand_down", f"replica {claim.host}/{claim.pid} runs it")
    if not entry.owned_by(me) and not forced and timing.due(entry) > now:
        owner = entry.owner
        return Decision("stand_down", f"a newer capture on replica {owner.host}/{owner.pid}")
    return Decision("claim", "due")
