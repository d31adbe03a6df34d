"""The storage calls on the agent's path, bounded: a storage that is away costs a turn at most
``storage_timeout_seconds``.

Two storage calls sit on an agent turn's path: the memory read before each model call and the
journal write of the capture after the turn. With PostgreSQL down each waited psycopg_pool's
30 s for a connection — a minute per turn — and a host that stops answering (a network
partition) can hold an established connection for the TCP timeout, far longer. No client
setting bounds every case (SQLite's busy timeout, a hung network file system), so the
:class:`StorageGuard` runs each call on one of its own daemon threads and waits at most the
timeout; past it the call is abandoned (it ends on its own; the pool's own timeout is the same
value) and the turn goes on: no memory for this model call, the capture kept in the process.

During an outage the storage is not asked on every call: after a failure, calls fail at once
for ``probe_seconds``, then one call probes (bounded like any other), and while an abandoned call
still hangs no second one is started. So a turn waits at most one timeout, and most turns of a
long outage do not wait at all. The outage is logged once (WARNING) when it starts and once
(INFO) when the storage answers again — a probe, or any other call that reports success
(:meth:`StorageGuard.record_success`: a background update that was stored).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from deermem_middleware.storage.outage import StorageUnavailable, first_line, is_outage

__all__ = ["PROBE_SECONDS", "StorageGuard", "StorageUnavailable"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

PROBE_SECONDS = 5.0
"""During an outage, how long calls fail at once before one call asks the storage again."""

_IDLE_SECONDS = 30.0
"""A runner thread with nothing to do for this long exits (threads follow the peak load)."""


class _DaemonRunner:
    """Runs functions on daemon threads, started on demand and kept while busy.

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit, so one call
    abandoned on a hung storage would hold the process's exit.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: queue.SimpleQueue[
            tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Threads waiting for a task that no submitted task has claimed yet."""
        self._started = 0
        self._closed = False

    def close(self) -> None:
        """Let every thread go now rather than after its idle wait: a host that builds and
        releases an engine per request would otherwise keep one waiting thread per engine
        (1,000 released engines: 245 threads still alive). Later calls still run."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._tasks.put(None)  # wakes one waiting thread, which leaves

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            self._tasks.put((fn, future))
            if self._idle:
                self._idle -= 1  # a waiting thread takes it
            else:
                self._started += 1
                name = f"{self._name}-{self._started}"
                threading.Thread(target=self._loop, name=name, daemon=True).start()
        return future

    def _loop(self) -> None:
        while True:
            try:
                task = self._tasks.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # nobody counts on this thread: leave
                        self._idle -= 1
                        return
                continue  # a task was handed to a waiting thread: it is on its way
            if task is None:  # closed: already uncounted
                return
            fn, future = task
            # idle *before* the caller sees the result: its next call, at once, finds this
            # thread waiting instead of starting another (a busy machine once started one
            # per call in that gap)
            try:
                result = fn()
            except BaseException as exc:
                leave = self._done()
                future.set_exception(exc)
            else:
                leave = self._done()
                future.set_result(result)
            if leave:
                return

    def _done(self) -> bool:
        """Counts this thread idle again, unless the runner is closed (then: True, leave)."""
        with self._lock:
            if self._closed:
                return True
            self._idle += 1
            return False


class StorageGuard:
    """Bounded storage calls for the agent's path (see the module docstring). Thread-safe."""

    def __init__(
        self,
        timeout: float,
        *,
        probe_seconds: float = PROBE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        name: str = "deermem-storage",
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout!r}")
        self.timeout = timeout
        self.probe_seconds = probe_seconds
        self._clock = clock
        self._runner = _DaemonRunner(name)
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._next_probe = 0.0
        self._hanging = 0
        self._missed = 0
        """Calls that went without the storage during the current outage."""

    def close(self) -> None:
        """Lets the guard's threads go (the engine is closing); a later call still runs."""
        self._runner.close()

    @property
    def down(self) -> bool:
        """True from a failed call until a call succeeds: the storage is taken to be away."""
        with self._lock:
            return self._down_since is not None

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` within the timeout. Raises :class:`StorageUnavailable` when it does not
        answer in time or fails to connect (or, during an outage, at once without asking);
        anything else ``fn`` raises propagates as it is. ``what`` names the call in logs."""
        with self._lock:
            if self._down_since is not None:
                if self._hanging:
                    self._missed += 1
                    raise StorageUnavailable(f"{what}: the storage still has not answered")
                if self._clock() < self._next_probe:
                    self._missed += 1
                    raise StorageUnavailable(f"{what}: the storage is unreachable")
                self._next_probe = self._clock() + self.probe_seconds  # this call probes
        future = self._runner.submit(fn)
        try:
            result = future.result(self.timeout)
        except Exception as exc:
            if not future.done():  # the wait timed out: abandon the call, it ends on its own
                with self._lock:
                    self._hanging += 1
                future.add_done_callback(self._ended)
                reason = f"no answer within {self.timeout:g}s"
                self._failed(what, reason)
                raise StorageUnavailable(f"{what}: {reason}") from None
            if not is_outage(exc):
                raise
            reason = f"{type(exc).__name__}: {first_line(exc)}"
            self._failed(what, reason)
            raise StorageUnavailable(f"{what}: {reason}") from exc
        self.record_success()
        return result

    def record_success(self) -> None:
        """The storage answered (here, or on another path): the outage, if any, is over."""
        with self._lock:
            since, missed = self._down_since, self._missed
            self._down_since = None
            self._missed = 0
        if since is not None:
            logger.info(
                "memory storage answers again after %.1fs; %d call(s) on the agent's path went "
                "without it meanwhile",
                self._clock() - since,
                missed,
            )

    def _ended(self, future: concurrent.futures.Future[Any]) -> None:
        """An abandoned call finished (its result is not wanted any more)."""
        with self._lock:
            self._hanging -= 1

    def _failed(self, what: str, reason: str) -> None:
        now = self._clock()
        with self._lock:
            first = self._down_since is None
            if first:
                self._down_since = now
            self._missed += 1
            self._next_probe = now + self.probe_seconds
        if first:
            logger.warning(
                "memory storage unreachable (%s: %s): agent turns go on without memory and "
                "their captures wait in this process until it answers; asked again at most "
                "every %gs, each wait bounded by storage_timeout_seconds=%g (logged once per "
                "outage)",
                what,
                reason,
                self.probe_seconds,
                self.timeout,
            )
        else:
            logger.debug("memory storage still unreachable (%s: %s)", what, reason)
