"""The scheduler's debounce bookkeeping: each key's pending work and when it is due (pure).

:class:`DebounceTable` is the state machine inside
:class:`~deermem_middleware.runtime.scheduler.DebounceScheduler`: a capture replaces its key's
pending work (or is merged with it, by the caller's ``merge``: the memory keeps the turns of a
windowed thread's earlier captures) and pushes its deadline to
``min(last + debounce, first + max_wait)``, a retry backs a key off, a key that is running is
skipped until it is free again. It holds no threads, no lock and no clock — the caller passes
``now`` — so tests and benchmarks (``benchmarks/extraction_cost.py``)
can simulate hours of traffic without sleeping, and the scheduler is left with only its threads.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["DebounceTable"]

K = TypeVar("K", bound=Hashable)
P = TypeVar("P")


@dataclass
class _Entry(Generic[P]):
    payload: P
    first: float
    last: float
    seq: int
    not_before: float = float("-inf")
    """Retry back-off: the entry is not handed out before this time, even by a flush."""
    run_by: float = float("inf")
    """Due at the latest at this time whatever its debounce (:meth:`DebounceTable.fire`)."""


class DebounceTable(Generic[K, P]):
    """Pending work per key with debounce + max-wait deadlines (pure; the caller passes ``now``).

    ``submit`` replaces a key's payload and pushes its deadline to
    ``min(last + debounce, first + max_wait)``; ``fire`` makes it due now. ``pop_due`` hands out
    the keys whose deadline passed. A heap with lazy invalidation keeps all O(log n).
    """

    def __init__(
        self,
        debounce_seconds: float,
        max_wait_seconds: float | None,
        merge: Callable[[P, P], P] | None = None,
    ) -> None:
        """``merge(older, newer)``: the payload that replaces a key's pending one (default: the
        newer one), also when a failed run is backed off while a newer submit is pending."""
        if debounce_seconds < 0:
            raise ValueError("debounce_seconds must be >= 0")
        if max_wait_seconds is not None and max_wait_seconds < 0:
            raise ValueError("max_wait_seconds must be >= 0")
        self.debounce = debounce_seconds
        self.max_wait = max_wait_seconds
        self._merge = merge
        self._entries: dict[K, _Entry[P]] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._backed_off: set[K] = set()  # keys with a not_before: ``deferred`` stays cheap

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def deadline_of(self, entry: _Entry[P]) -> float:
        deadline = min(entry.last + self.debounce, entry.run_by)
        if self.max_wait is not None:
            deadline = min(deadline, entry.first + self.max_wait)
        return max(deadline, entry.not_before)

    def submit(self, key: K, payload: P, now: float, *, not_before: float | None = None) -> bool:
        """Record ``payload`` as the pending work of ``key``; True when it replaced older work.

        ``not_before`` defers the key (retry back-off); a later submit keeps the deferral.
        """
        seq = next(self._seq)
        entry = self._entries.get(key)
        replaced = entry is not None
        if entry is None:
            entry = _Entry(payload, now, now, seq)
            self._entries[key] = entry
        else:
            if self._merge is not None:
                payload = self._merge(entry.payload, payload)
            entry.payload, entry.last, entry.seq = payload, now, seq
        if not_before is not None:
            entry.not_before = max(entry.not_before, not_before)
            self._backed_off.add(key)
        heapq.heappush(self._heap, (self.deadline_of(entry), seq, key))
        return replaced

    def fire(self, key: K, now: float) -> bool:
        """Make the pending work of ``key`` due at ``now`` instead of after its debounce (a
        newer submit keeps it due); other keys keep their deadlines. A back-off still holds
        (:meth:`defer`), and a busy key waits for :meth:`reschedule` as ever. False when
        ``key`` has nothing pending."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        entry.run_by = min(entry.run_by, now)
        self._push(key, entry)
        return True

    def defer(self, key: K, payload: P, now: float, not_before: float) -> None:
        """Back off ``key`` until ``not_before``; its pending payload, if newer, is kept (merged
        with the failed one when the table merges)."""
        entry = self._entries.get(key)
        if entry is None:
            self.submit(key, payload, now, not_before=not_before)
            return
        if self._merge is not None:
            entry.payload = self._merge(payload, entry.payload)
        entry.not_before = max(entry.not_before, not_before)
        self._backed_off.add(key)
        self._push(key, entry)

    def deferred(self, now: float) -> int:
        """Keys backed off beyond ``now`` (a flush does not run them)."""
        return sum(1 for k in self._backed_off if self._entries[k].not_before > now)

    def keys(self) -> list[K]:
        """Every key with pending work."""
        return list(self._entries)

    def pending(self, key: K) -> P | None:
        """The pending payload of ``key`` (None: nothing pending)."""
        entry = self._entries.get(key)
        return None if entry is None else entry.payload

    def next_release(self, now: float) -> float | None:
        """When the earliest back-off still running at ``now`` ends (None: none runs)."""
        ends = (self._entries[k].not_before for k in self._backed_off)
        return min((end for end in ends if end > now), default=None)

    def _pop(self, key: K) -> _Entry[P]:
        self._backed_off.discard(key)
        return self._entries.pop(key)

    def reschedule(self, key: K) -> None:
        """Give ``key`` a live deadline again (after :meth:`pop_due` skipped it as busy).

        An overdue key is then handed out by the next :meth:`pop_due`.
        """
        entry = self._entries.get(key)
        if entry is not None:
            self._push(key, entry)

    def _push(self, key: K, entry: _Entry[P]) -> None:
        """A live heap item for ``entry`` (the older ones go stale)."""
        entry.seq = next(self._seq)
        heapq.heappush(self._heap, (self.deadline_of(entry), entry.seq, key))

    def next_deadline(self) -> float | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(
        self,
        now: float,
        *,
        busy: set[K] | frozenset[K] = frozenset(),
        limit: int | None = None,
    ) -> list[tuple[K, P, float]]:
        """Pop due keys not in ``busy``, earliest deadline first, at most ``limit``: (key,
        payload, first-submit time).

        A due key that is busy stays pending; call :meth:`reschedule` when it becomes free. Due
        keys beyond ``limit`` stay pending with their deadline (:meth:`has_due` tells).
        """
        due: list[tuple[K, P, float]] = []
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is None or entry.seq != seq:
                heapq.heappop(self._heap)
                continue
            if deadline > now or (limit is not None and len(due) >= limit and key not in busy):
                break
            heapq.heappop(self._heap)
            if key in busy:
                continue  # stays in _entries without a live heap item until reschedule
            self._pop(key)
            due.append((key, entry.payload, entry.first))
        return due

    def has_due(self, now: float) -> bool:
        """True when a key's deadline has passed and it is still here (held back by a limit)."""
        deadline = self.next_deadline()
        return deadline is not None and deadline <= now

    def pop_all(
        self,
        *,
        busy: set[K] | frozenset[K] = frozenset(),
        now: float = float("inf"),
        limit: int | None = None,
    ) -> list[tuple[K, P, float]]:
        """Pop pending keys not in ``busy`` regardless of debounce deadlines (flush), at most
        ``limit`` — but not keys backed off beyond ``now``."""
        out: list[tuple[K, P, float]] = []
        for key, entry in self._entries.items():
            if limit is not None and len(out) >= limit:
                break
            if key not in busy and entry.not_before <= now:
                out.append((key, entry.payload, entry.first))
        for key, _, _ in out:
            self._pop(key)  # their heap items are stale now: dropped lazily
        if not self._entries:
            self._heap.clear()
        return out

    def _drop_stale(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry.seq == seq:
                return
            heapq.heappop(self._heap)
