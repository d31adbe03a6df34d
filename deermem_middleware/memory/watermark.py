"""Thread watermarks: how far each thread's conversation has been distilled (pure).

A watermark per thread (the last extracted turn's fingerprint, how many turns, when) is what lets
an update read only the *new* turns of a conversation that is resent whole on every capture —
the extraction cost stays proportional to what was said since, not to the thread's length. A
conversation captured without a thread id is tracked by content (``seen``: the fingerprints
already extracted). A scope keeps at most :data:`MAX_WATERMARKS`; forgetting one only means an
old thread, if it ever comes back, is re-read once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from deermem_middleware.memory.document import MAX_SEEN_TURNS, Memory, Watermark, utc_now_iso
from deermem_middleware.memory.time import parse_timestamp

__all__ = ["MAX_WATERMARKS", "advance_watermark", "newest_watermarks"]

MAX_WATERMARKS = 512
"""Threads whose watermark we keep per scope; the least recently updated are forgotten first
(forgetting one only means an old thread, if it ever comes back, is re-read once)."""


def advance_watermark(
    memory: Memory,
    thread_id: str,
    turn: str,
    *,
    count: int,
    now: datetime,
    position: int | None = None,
    seen: Sequence[str] | None = None,
) -> Memory:
    """Record that ``thread_id`` has been distilled up to the turn fingerprinted ``turn`` (the
    ``position``-th turn of the conversation); ``seen``: the fingerprints just extracted, for a
    content-addressed key (a conversation without a thread id)."""
    marks = dict(memory.watermarks)
    previous = marks.pop(thread_id, None)
    total = (previous.count if previous else 0) + count
    known = tuple(previous.seen) if previous else ()
    marks[thread_id] = Watermark(
        turn=turn,
        count=total,
        updatedAt=utc_now_iso(now),
        position=position,
        seen=(*known, *seen)[-MAX_SEEN_TURNS:] if seen is not None else known,
    )
    return memory.model_copy(update={"watermarks": newest_watermarks(marks)})


def newest_watermarks(marks: Mapping[str, Watermark]) -> dict[str, Watermark]:
    """At most :data:`MAX_WATERMARKS` of ``marks``: the most recently updated (by time, not by
    spelling: an imported document may write its timestamps differently)."""
    if len(marks) <= MAX_WATERMARKS:
        return dict(marks)
    floor = datetime.min.replace(tzinfo=UTC)
    ordered = sorted(marks.items(), key=lambda kv: parse_timestamp(kv[1].updatedAt) or floor)
    return dict(ordered[len(marks) - MAX_WATERMARKS :])
