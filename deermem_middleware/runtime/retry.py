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

import random
import threading
import time
from collections.abc import Callable

__all__ = ["CircuitBreaker", "describe_failure", "is_transient"]


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
