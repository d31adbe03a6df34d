"""Back-off and a circuit breaker for extraction calls.

When the extraction endpoint times out, rate-limits (429) or fails (5xx), the update is not
dropped: it stays pending and is retried after an exponentially growing, jittered delay. After
``threshold`` consecutive failures the breaker *opens*: no extraction call is made by anyone until
the back-off ends, so a dead endpoint costs one probe per back-off period instead of a call per
pending thread per turn. The first success closes it.

(Each call also has the client's own short retries — ``max_retries`` of the model config; this
layer is about minutes, not seconds.)
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from deermem_middleware.runtime.scheduler import RetryLater

if TYPE_CHECKING:
    from deermem_middleware.config import MemoryConfig
    from deermem_middleware.runtime.jobs import CaptureJob

__all__ = ["CircuitBreaker", "describe_failure", "is_transient", "retry_for_failure"]

logger = logging.getLogger(__name__)


_MAX_DOUBLINGS = 62
"""Beyond this many doublings any base delay is past any sensible cap (2**62 s is ~10**11 years)."""


class CircuitBreaker:
    """Consecutive-failure counter with exponential, jittered back-off. Thread-safe."""

    def __init__(
        self,
        *,
        base_seconds: float = 2.0,
        max_seconds: float = 300.0,
        threshold: int = 3,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.base = base_seconds
        self.cap = max_seconds
        self.threshold = threshold
        self._clock = clock
        self._jitter = jitter
        self._lock = threading.Lock()
        self.failures = 0
        self._open_until = float("-inf")

    def blocked_for(self) -> float:
        """Seconds until calls may be made again (0: closed, or half-open for one probe)."""
        with self._lock:
            return max(0.0, self._open_until - self._clock())

    @property
    def is_open(self) -> bool:
        return self.blocked_for() > 0

    def record_success(self) -> None:
        with self._lock:
            self.failures = 0
            self._open_until = float("-inf")

    def record_failure(self) -> float:
        """Count a failed call; returns how long its work should wait before the next try."""
        with self._lock:
            self.failures += 1
            # the exponent is capped before the power: 2.0 ** 1024 overflows a float, which
            # once turned the 1,025th failure of a dead endpoint (~1.5 days) into a lost job
            ceiling = min(self.cap, self.base * 2.0 ** min(self.failures - 1, _MAX_DOUBLINGS))
            delay = ceiling * (0.5 + 0.5 * self._jitter())  # "equal jitter": never near zero
            if self.failures >= self.threshold:
                self._open_until = max(self._open_until, self._clock() + delay)
            return delay


def is_transient(exc: BaseException) -> bool:
    """Timeouts, connection failures, 429 and 5xx: worth retrying as is."""
    try:
        import openai

        if isinstance(
            exc,
            openai.APITimeoutError
            | openai.APIConnectionError
            | openai.RateLimitError
            | openai.InternalServerError,
        ):
            return True
        if isinstance(exc, openai.APIStatusError):
            return exc.status_code in (408, 409, 425, 429) or exc.status_code >= 500
    except ImportError:  # pragma: no cover - openai is a dependency of langchain-openai
        pass
    try:
        import httpx

        if isinstance(exc, httpx.TimeoutException | httpx.TransportError):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, TimeoutError | ConnectionError)


def describe_failure(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    prefix = f"HTTP {status} " if status else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{prefix}{type(exc).__name__}: {text[:300]}"


def retry_for_failure(
    exc: Exception, job: CaptureJob, breaker: CircuitBreaker, config: MemoryConfig
) -> RetryLater | None:
    """What to do with ``job`` after its update raised ``exc``: when to try again (the work
    stays pending), or None when there is nothing to retry. Logs the decision.

    - the model answered with nothing usable: None, memory stays as it was (the turns stay below
      the watermark, so the thread's next capture offers them again); the breaker closes;
    - other writers kept winning the race: soon, jittered; the breaker is not involved;
    - this scope's storage failed: not the endpoint, so no breaker and other users go on; once
      extracted, only the save is retried (no new model call);
    - anything else (timeouts, 5xx, 429...): the breaker's back-off.
    """
    from deermem_middleware.extraction.extractor import ExtractionError
    from deermem_middleware.runtime.jobs import SaveFailed
    from deermem_middleware.storage.base import RevisionConflict, StorageError

    user, thread = job.scope.user_id, job.thread_id
    if isinstance(exc, ExtractionError):
        breaker.record_success()
        logger.error("memory update for user %r thread %r skipped: %s", user, thread, exc)
        return None
    if isinstance(exc, RevisionConflict):
        return RetryLater(random.uniform(0.05, 0.5), str(exc))
    if isinstance(exc, StorageError):
        retry = exc.job if isinstance(exc, SaveFailed) else job
        attempts = retry.extracted.attempts if retry.extracted is not None else 1
        delay = min(
            config.retry_max_seconds,
            config.retry_base_seconds * 5 * 2.0 ** min(attempts - 1, 30),
        )
        logger.error(
            "memory update for user %r thread %r could not be stored (%s); kept pending, "
            "next try in %.0fs%s",
            user,
            thread,
            exc,
            delay,
            " (the save only: the update is already extracted)" if retry.extracted else "",
        )
        return RetryLater(delay, str(exc), payload=retry)
    delay = breaker.record_failure()
    logger.warning(
        "memory update for user %r thread %r failed (%s; %d consecutive failure(s)); "
        "kept pending, next try in %.1fs%s",
        user,
        thread,
        describe_failure(exc),
        breaker.failures,
        delay,
        " (circuit breaker open)" if breaker.is_open else "",
        exc_info=None if is_transient(exc) else exc,
    )
    return RetryLater(delay, describe_failure(exc))
