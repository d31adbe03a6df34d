"""Debounce scheduler keyed by thread.

Why it exists: extraction is an LLM call, and people type in bursts. Each capture of a thread
*replaces* that thread's pending capture (the newest capture contains the whole conversation), and
the update runs after ``debounce_seconds`` of quiet on that thread — or at the latest
``max_wait_seconds`` after its first pending capture, so steady traffic cannot starve it (DeerFlow's
single global timer did exactly that). Threads never share pending work.

How it runs: one daemon *timer* thread owns the debounce table and a ``threading.Condition``; it
dispatches due jobs to a small pool of pre-started daemon *worker* threads that call the (sync)
handler. Nothing is bound to a caller's event loop, so the scheduler works the same from sync
nodes, async nodes, pytest-asyncio's per-test loops and ``atexit`` — where a fresh
``ThreadPoolExecutor`` or ``asyncio.to_thread`` can no longer start work, but threads that are
already running still can. The same key is never processed by two workers at once (its watermark
would race); a capture that becomes due while its key is running waits for that run to finish.

What is bounded is the *backlog* of due jobs no worker has started (``max_pending``, the config's
``queue_max_depth``): a pending entry is one small entry per key, a due job is an LLM call. When the
backlog is full, due keys stay in the table in deadline order and newer captures still replace
theirs — nothing is dropped or run early; a WARNING is logged once. ``flush`` honours the bound.

The debounce bookkeeping itself is :class:`~deermem_middleware.runtime.debounce.DebounceTable`
(still importable from here), a pure state machine driven by an explicit clock, so tests and
benchmarks can simulate hours of traffic without sleeping.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from deermem_middleware.runtime.debounce import DebounceTable

__all__ = ["DebounceScheduler", "DebounceTable", "RetryLater", "SchedulerStats"]

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
P = TypeVar("P")


class RetryLater(Exception):
    """Raised by a handler: keep this key's work pending and try again in ``delay`` seconds.

    A newer submit of the key replaces the payload but keeps the back-off, so a failing endpoint
    is not hammered by every new turn. ``payload`` replaces the one that failed (e.g. the same
    work with what it already computed).
    """

    def __init__(self, delay: float, reason: str = "", payload: Any = None) -> None:
        super().__init__(reason or f"retry in {delay:.1f}s")
        self.delay = max(0.0, delay)
        self.reason = reason
        self.payload = payload
        """What to retry instead of the payload that failed (None: the same one); a newer
        submit of the key still wins over it."""


@dataclass
class SchedulerStats:
    submitted: int = 0
    replaced: int = 0
    dispatched: int = 0
    completed: int = 0
    failed: int = 0
    retried: int = 0
    """Runs that asked to be retried later (:class:`RetryLater`)."""
    max_delay_seconds: float = 0.0
    """Longest time from a key's first pending submit to the start of its run."""
    max_queued: int = 0
    """Most due jobs waiting for a worker at once (at most ``max_pending``)."""

    def snapshot(self) -> dict[str, float]:
        return dict(self.__dict__)


_LIVE: weakref.WeakSet[DebounceScheduler[Any, Any]] = weakref.WeakSet()
_STOP = object()


class DebounceScheduler(Generic[K, P]):
    """Runs ``handler(key, payload)`` once per burst of submits of ``key`` (see module doc);
    ``max_pending`` bounds the backlog of due jobs waiting for a worker (None: unbounded)."""

    def __init__(
        self,
        handler: Callable[[K, P], None],
        *,
        debounce_seconds: float = 30.0,
        max_wait_seconds: float | None = 120.0,
        workers: int = 2,
        max_pending: int | None = None,
        flush_on_exit_seconds: float | None = 10.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "deermem",
        merge: Callable[[P, P], P] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._handler = handler
        self._table: DebounceTable[K, P] = DebounceTable(debounce_seconds, max_wait_seconds, merge)
        self._clock = clock
        self._cond = threading.Condition()
        self._inbox: collections.deque[tuple[K, P, float]] = collections.deque()
        self._work: queue.Queue[Any] = queue.Queue()
        self._running: set[K] = set()
        self._queued = 0
        self._flushing = 0
        self._closed = False
        self._flush_on_exit = flush_on_exit_seconds
        if max_pending is not None and max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self._max_pending = max_pending
        self._held = self._warned = False  # due work waits for a full backlog / WARNING logged
        self.stats = SchedulerStats()
        self._timer = threading.Thread(target=self._timer_loop, name=f"{name}-timer", daemon=True)
        self._workers = [
            threading.Thread(target=self._worker_loop, name=f"{name}-worker-{i}", daemon=True)
            for i in range(workers)
        ]
        self._timer.start()
        for worker in self._workers:
            worker.start()
        _LIVE.add(self)

    # -- public API -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, key: K, payload: P) -> None:
        """Queue ``payload`` as the newest pending work of ``key``. Thread-safe, O(1), never blocks
        on I/O."""
        with self._cond:
            if self._closed:
                raise RuntimeError("scheduler is closed")
            self._inbox.append((key, payload, self._clock()))
            self.stats.submitted += 1
            self._cond.notify_all()

    @property
    def flushing(self) -> bool:
        """True while a :meth:`flush` (or :meth:`close`) waits: work runs now, not when due."""
        with self._cond:
            return self._flushing > 0

    def holds(self, key: K) -> bool:
        """True when ``key`` has work here: waiting, queued or running."""
        with self._cond:
            return (
                key in self._table
                or key in self._running
                or any(k == key for k, _, _ in self._inbox)
            )

    def pending_keys(self) -> list[K]:
        """The keys with work waiting here (not those running)."""
        with self._cond:
            self._merge_inbox_locked()
            return self._table.keys()

    def pending_work(self, key: K) -> P | None:
        """The newest work of ``key`` waiting to run (None: none; a run in progress is not
        pending)."""
        with self._cond:
            self._merge_inbox_locked()
            return self._table.pending(key)

    def fire(self, key: K) -> bool:
        """Run the pending work of ``key`` now instead of after its debounce; returns at once
        (:meth:`DebounceTable.fire`: other keys keep their deadlines, a back-off still holds).
        False when ``key`` has nothing pending (or the scheduler is closed)."""
        with self._cond:
            if self._closed:
                return False
            self._merge_inbox_locked()
            fired = self._table.fire(key, self._clock())
            if fired:
                self._cond.notify_all()
            return fired

    def pending(self) -> int:
        """Keys waiting (debouncing, queued or running)."""
        with self._cond:
            return self._pending_locked()

    def _pending_locked(self) -> int:
        # a key can sit in the inbox and the table at once (a newer submit not yet merged), and
        # a queued key is also in ``_running``: count distinct keys (not O(table): 100k pending)
        others = {key for key in self._running if key not in self._table}
        others.update(key for key, _, _ in self._inbox if key not in self._table)
        return len(self._table) + len(others)

    def flush(self, timeout: float | None = None) -> bool:
        """Run everything pending now and wait for it; True when all of it finished in time.

        Work backed off by :class:`RetryLater` is not forced (the endpoint is failing): a flush
        that leaves such work pending returns False at once instead of spinning.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while True:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    # back-offs ending before our deadline are waited for; longer ones are not
                    horizon = self._clock() + (remaining or 0.0)
                    if not self._busy_locked(horizon):
                        break
                    self._cond.wait(remaining)
                return not self._table.deferred(self._clock())
            finally:
                self._flushing -= 1

    async def aflush(self, timeout: float | None = None) -> bool:
        """:meth:`flush` for async code: waits without blocking the caller's event loop."""
        return await _in_thread(self.flush, timeout)

    def close(self, timeout: float | None = 10.0) -> bool:
        """Flush (bounded by ``timeout``), then stop the threads. True when nothing was left."""
        if self._closed:
            return True
        drained = self.flush(timeout)
        with self._cond:
            self._closed = True
            left = self._pending_locked()
            self._cond.notify_all()
        for _ in self._workers:
            self._work.put(_STOP)
        if not drained:
            logger.warning("memory scheduler closed with %d pending update(s) not processed", left)
        _LIVE.discard(self)
        return drained

    async def aclose(self, timeout: float | None = 10.0) -> bool:
        return await _in_thread(self.close, timeout)

    # -- internals --------------------------------------------------------------------------

    def _busy_locked(self, horizon: float | None = None) -> bool:
        """Work a flush must wait for: anything but keys backed off beyond ``horizon``."""
        if self._inbox or self._queued or self._running:
            return True
        return len(self._table) > self._table.deferred(
            self._clock() if horizon is None else horizon
        )

    def _merge_inbox_locked(self) -> None:
        while self._inbox:
            key, payload, at = self._inbox.popleft()
            if self._table.submit(key, payload, at):
                self.stats.replaced += 1

    def _timer_loop(self) -> None:
        with self._cond:
            while not self._closed:
                now = self._clock()
                self._merge_inbox_locked()
                room = None if self._max_pending is None else self._max_pending - self._queued
                if self._flushing:
                    due = self._table.pop_all(busy=self._running, now=now, limit=room)
                else:
                    due = self._table.pop_due(now, busy=self._running, limit=room)
                for key, payload, first in due:
                    logger.debug(
                        "memory update scheduled: %r after %.1fs pending%s",
                        key,
                        now - first,
                        " (flush)" if self._flushing else "",
                    )
                    self._running.add(key)
                    self._queued += 1
                    self.stats.dispatched += 1
                    self.stats.max_delay_seconds = max(self.stats.max_delay_seconds, now - first)
                    self._work.put((key, payload))
                self.stats.max_queued = max(self.stats.max_queued, self._queued)
                full = self._max_pending is not None and self._queued >= self._max_pending
                held = full and self._table.has_due(now)  # past their deadline, waiting for room
                self._note_backlog(held)
                if held or (self._flushing and len(self._table) > self._table.deferred(now)):
                    timeout: float | None = None  # a worker's pick-up or finish wakes us
                else:
                    next_deadline = self._table.next_deadline()
                    release = self._table.next_release(now) if self._flushing else None
                    if release is not None:  # a flush runs backed-off work when its back-off
                        # ends, not at its debounce deadline (up to max_wait_seconds later)
                        next_deadline = min(release, next_deadline or release)
                    timeout = None if next_deadline is None else max(0.0, next_deadline - now)
                self._cond.wait(timeout)

    def _note_backlog(self, held: bool) -> None:
        """WARNING once when due work waits for a full backlog; INFO once it is half empty."""
        self._held = held
        if held and not self._warned:
            self._warned = True
            logger.warning(
                "memory update backlog full: %d update(s) wait for %d worker(s) "
                "(queue_max_depth); due threads stay pending (a newer capture still replaces "
                "theirs): nothing is dropped or run early",
                self._queued,
                len(self._workers),
            )
        elif self._warned and not held and self._queued <= (self._max_pending or 0) // 2:
            self._warned = False
            logger.info("memory update backlog has room again (%d pending)", len(self._table))

    def _worker_loop(self) -> None:
        while True:
            item = self._work.get()
            if item is _STOP:
                return
            key, payload = item
            with self._cond:
                self._queued -= 1
                if (self._held or self._flushing) and self._queued <= (self._max_pending or 0) // 2:
                    self._cond.notify_all()  # refill the backlog before the workers run dry
            ok = True
            retry: RetryLater | None = None
            try:
                self._handler(key, payload)
            except RetryLater as exc:
                retry = exc
            except BaseException:  # one failing job never stops the worker
                ok = False
                logger.exception("memory update for %r failed", key)
            with self._cond:
                self._running.discard(key)
                if retry is not None:
                    self.stats.retried += 1
                    now = self._clock()
                    self._merge_inbox_locked()  # a newer submit in the inbox is the one kept
                    again = payload if retry.payload is None else retry.payload
                    self._table.defer(key, again, now, now + retry.delay)
                elif ok:
                    self.stats.completed += 1
                else:
                    self.stats.failed += 1
                self._table.reschedule(key)
                self._cond.notify_all()


def _in_thread(fn: Callable[[float | None], bool], timeout: float | None) -> asyncio.Future[bool]:
    """Run a blocking wait on a short-lived thread and await it from any event loop.

    A plain thread (not the loop's default executor) keeps this usable during shutdown hooks.
    """
    future: concurrent.futures.Future[bool] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(fn(timeout))
        except BaseException as exc:  # pragma: no cover - fn does not raise
            future.set_exception(exc)

    threading.Thread(target=run, name="deermem-await", daemon=True).start()
    return asyncio.wrap_future(future)


@atexit.register
def _flush_at_exit() -> None:
    """Bounded flush of every live scheduler when the interpreter exits (no lost pending work)."""
    for scheduler in list(_LIVE):
        if scheduler._flush_on_exit is None or scheduler.closed:
            continue
        try:
            scheduler.close(scheduler._flush_on_exit)
        except Exception:  # pragma: no cover - best effort at exit
            logger.exception("memory scheduler flush at exit failed")
