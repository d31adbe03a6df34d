"""Thread watermarks: how far each thread's conversation has been distilled (pure).

A watermark per thread (the last extracted turn's fingerprint, how many turns, when) is what lets
an update read only the *new* turns of a conversation that is resent whole on every capture —
the extraction cost stays proportional to what was said since, not to the thread's length. Not
every thread's capture grows: an agent without a checkpointer sees only the newest message, a
history-window middleware keeps only the last few. So a thread's watermark also keeps its most
recently extracted fingerprints (``seen``), and novelty is decided per turn
(:func:`~deermem_middleware.memory.conversation.turns_after`), never by length. A conversation
captured without a thread id is tracked by content alone (``seen``: the fingerprints already
extracted). A scope keeps at most :data:`MAX_WATERMARKS`; forgetting one only means an old
thread, if it ever comes back, is re-read once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from deermem_middleware.memory.document import MAX_SEEN_TURNS, Memory, Watermark, utc_now_iso
from deermem_middleware.memory.time import parse_timestamp

__all__ = [
    "MAX_OPENING_TURNS",
    "MAX_THREAD_SEEN_TURNS",
    "MAX_WATERMARKS",
    "advance_watermark",
    "newest_watermarks",
]

MAX_WATERMARKS = 512
"""Threads whose watermark we keep per scope; the least recently updated are forgotten first
(forgetting one only means an old thread, if it ever comes back, is re-read once)."""

MAX_THREAD_SEEN_TURNS = 16
"""Fingerprints a thread's watermark remembers (its newest extracted turns). A front-trimmed or
summarised history still holds the watermark itself; what ``seen`` must recognise is the last
turn of an *older* capture from another worker, which lags by the few exchanges sent while an
extraction ran. Eight exchanges cover that; an older capture lagging further is read again
(reinforcing, never losing, what it said). Small, because every update loads and saves the
whole document: with its ``opening``, a thread's watermark is about 1 KB (message-id
fingerprints), 0.5 MB for :data:`MAX_WATERMARKS` threads."""

MAX_OPENING_TURNS = 4
"""First turns of a thread's capture its watermark remembers (``opening``): an older capture of
up to two exchanges, however late it is replayed, is then recognised as done; a longer one
has its turns after these read again (reinforcing what memory holds, never losing a turn)."""


def advance_watermark(
    memory: Memory,
    thread_id: str,
    turn: str,
    *,
    count: int,
    now: datetime,
    position: int | None = None,
    seen: Sequence[str] | None = None,
    max_seen: int = MAX_SEEN_TURNS,
    opening: Sequence[str] = (),
) -> Memory:
    """Record that ``thread_id`` has been distilled up to the turn fingerprinted ``turn`` (the
    ``position``-th turn of the capture); ``seen``: the fingerprints just extracted, appended to
    the key's and the newest ``max_seen`` kept (:data:`MAX_THREAD_SEEN_TURNS` for a thread,
    ``MAX_SEEN_TURNS`` for a conversation without a thread id); ``opening``: the fingerprints
    of that capture's first turns (the first :data:`MAX_OPENING_TURNS` kept)."""
    if max_seen < 1:
        raise ValueError(f"advance_watermark: max_seen must be at least 1, got {max_seen}")
    marks = dict(memory.watermarks)
    previous = marks.pop(thread_id, None)
    total = (previous.count if previous else 0) + count
    known = tuple(previous.seen) if previous else ()
    marks[thread_id] = Watermark(
        turn=turn,
        count=total,
        updatedAt=utc_now_iso(now),
        position=position,
        seen=(*known, *seen)[-max_seen:] if seen is not None else known,
        opening=tuple(opening[:MAX_OPENING_TURNS]),
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
