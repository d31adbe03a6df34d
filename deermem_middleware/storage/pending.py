"""A pending capture as the journal keeps it, and how it changes hands between replicas (pure).

A capture waits ``debounce_seconds`` before its extraction runs. While it waits it is a
:class:`JournalEntry`: one per (user, agent, thread), replaced by the thread's next capture, so
the entry is always the *newest* capture of the thread — whichever process took the turn. That
is what lets several replicas share one burst: the replica that took the newest turn (the
entry's *owner*) runs the extraction once, and every replica whose own timer fires earlier sees
that somebody captured after it and stands down.

Who runs it is settled by a :class:`Claim`, a lease written into the entry with compare-and-set:
the claimer renews it while it works (extracting, or backing off a failing endpoint) and removes
the entry once the update is stored. A claim that is not renewed expires, and so does an entry
nobody claimed (``expires``: its debounce plus the lease after its capture): either can then be
taken over by any live replica, without waiting for the same process to come back. A taker that
turns out to race a slow owner (paused, not dead) costs at most a second extraction call: the
thread's watermark is saved atomically with the memory, so the turns are applied once.

Everything here is a pure function of its inputs: the clock (``now``, wall-clock seconds, since
entries are compared across hosts) and the identity of the process (:func:`process_owner`) are
passed in. The journals (:mod:`deermem_middleware.storage.journal`) store what these return.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage.scope import MemoryScope

__all__ = [
    "LEGACY_ORPHAN_SECONDS",
    "Claim",
    "EntryHead",
    "JournalEntry",
    "Owner",
    "captured",
    "claimed",
    "engine_identity",
    "job_token",
    "me",
    "pid_alive",
    "process_owner",
    "released",
    "renewed",
    "with_turns",
]

_HOST = socket.gethostname()
_RUN: tuple[int, str] = (0, "")

LEGACY_ORPHAN_SECONDS = 600.0
"""An entry written before entries knew when they expire is taken over by another machine once
it is this old (a process on the same machine takes it over as soon as its writer is gone)."""


@dataclass(frozen=True, slots=True)
class Owner:
    """A process: its host, pid and a token drawn once per process (:func:`process_owner`)."""

    host: str
    pid: int
    run: str
    """The process's run token, and after a dot the engine's when the owner is one engine of
    the process (:func:`engine_identity`)."""

    @property
    def process(self) -> str:
        """The process's run token (without the engine's)."""
        return self.run.split(".", 1)[0]

    def is_gone(self, me: Owner) -> bool | None:
        """True when this process is certainly gone, as ``me`` can tell; None when ``me`` cannot
        tell (another machine: its pids mean nothing here)."""
        if self.host != me.host:
            return None
        if self.pid == me.pid:
            return self.process != me.process  # the same pid, another process: a predecessor
        return not pid_alive(self.pid)


def process_owner() -> tuple[str, int, str]:
    """(host, pid, run token) of this process. The token is new in every process (after a
    fork, the child draws its own), so a later process that gets the same pid — a restarted
    container's pid 1 — is told apart from the one that wrote an entry."""
    global _RUN
    pid = os.getpid()
    if _RUN[0] != pid:
        _RUN = (pid, secrets.token_hex(8))
    return _HOST, pid, _RUN[1]


def me() -> Owner:
    """This process as an :class:`Owner`."""
    return Owner(*process_owner())


def engine_identity(token: str) -> Owner:
    """One engine of this process, ``token`` being the engine's: engines of one process that
    share a storage (two configurations of one agent) take part in each other's threads like
    replicas, and are alive exactly as long as the process."""
    host, pid, run = process_owner()
    return Owner(host, pid, f"{run}.{token}")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def job_token(turns: tuple[Turn, ...]) -> str:
    """Identifies one capture of a thread: its length and its newest turn."""
    return f"{len(turns)}:{turns[-1].fingerprint if turns else ''}"


@dataclass(frozen=True, slots=True)
class Claim:
    """Which process runs a thread's pending capture, until when (wall-clock seconds)."""

    run: str
    host: str
    pid: int
    until: float

    @property
    def holder(self) -> Owner:
        return Owner(self.host, self.pid, self.run)

    def held_by(self, me: Owner) -> bool:
        return self.run == me.run and self.pid == me.pid and self.host == me.host

    def alive(self, me: Owner, now: float) -> bool:
        """Still in force as ``me`` sees it: not expired, and its holder not known to be gone."""
        if self.held_by(me):
            return True
        return self.until > now and not self.holder.is_gone(me)

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "host": self.host, "pid": self.pid, "until": self.until}

    @classmethod
    def from_json(cls, data: Any) -> Claim | None:
        if not isinstance(data, dict):
            return None
        return cls(
            str(data.get("run", "")),
            str(data.get("host", "")),
            int(data.get("pid", 0)),
            float(data.get("until", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class JournalEntry:
    scope: MemoryScope
    thread_id: str
    turns: tuple[Turn, ...]
    host: str
    pid: int
    created: float
    """When this capture was taken (wall clock): the thread's last capture."""
    run: str = ""
    """The writing process's run token (:func:`process_owner`); "" in entries written before
    tokens existed."""
    conversation: str | None = None
    """The progress key of a capture without a thread id (see ``CaptureJob.conversation``)."""
    first: float | None = None
    """When the thread's oldest capture not yet stored was taken, whichever replica took it
    (None: ``created``): ``max_wait_seconds`` counts from it across replicas."""
    expires: float | None = None
    """Unclaimed after this, the entry is anyone's to take over: its owner should have claimed
    it by then (its debounce plus the lease). None: written before entries expired."""
    claim: Claim | None = None
    version: str = ""
    """Changes on every write; compare-and-set compares it (set by the journal)."""

    @classmethod
    def mine(
        cls,
        scope: MemoryScope,
        thread_id: str,
        turns: tuple[Turn, ...],
        conversation: str | None = None,
        *,
        expires_in: float | None = None,
        now: float | None = None,
        owner: Owner | None = None,
    ) -> JournalEntry:
        """An entry owned by ``owner`` (default: this process), written ``now`` (default: the
        clock), anyone's to take over ``expires_in`` seconds later unless claimed (None: the
        legacy rule)."""
        host, pid, run = process_owner() if owner is None else (owner.host, owner.pid, owner.run)
        at = time.time() if now is None else now
        expires = None if expires_in is None else at + expires_in
        return cls(scope, thread_id, turns, host, pid, at, run, conversation, at, expires)

    @property
    def token(self) -> str:
        return job_token(self.turns)

    @property
    def owner(self) -> Owner:
        return Owner(self.host, self.pid, self.run)

    @property
    def since(self) -> float:
        """When the thread's pending work began (:attr:`first`, or :attr:`created`)."""
        return self.created if self.first is None else min(self.first, self.created)

    @property
    def orphan_at(self) -> float:
        """From this time on nobody is known to work on the entry: an unclaimed entry past
        :attr:`expires`, or a claim that was not renewed."""
        if self.claim is not None:
            return self.claim.until
        return self.created + LEGACY_ORPHAN_SECONDS if self.expires is None else self.expires

    def owned_by(self, me: Owner) -> bool:
        return self.run == me.run and self.pid == me.pid and self.host == me.host

    def owner_is_gone(self, orphan_after_seconds: float, now: float | None = None) -> bool:
        """True when the process that wrote this entry cannot still be working on it: gone
        from this machine, or silent past :attr:`expires` (stalled, paused, or on another
        machine whose pids mean nothing here). An entry written before entries expired is
        left to a live process of this machine, and taken from another machine's
        ``orphan_after_seconds`` after it was written."""
        gone = self.owner.is_gone(me())
        if gone:
            return True
        at = time.time() if now is None else now
        if self.expires is None:  # a live process here will do it; elsewhere: wait long
            return gone is None and at - self.created > orphan_after_seconds
        return at > self.expires  # alive but silent (stalled, paused): its lease has run out

    def takeable(self, me: Owner, now: float, *, orphan_after_seconds: float) -> bool:
        """Whether ``me`` may claim this entry now without its owner's consent: no claim in
        force, and its owner gone or silent past its expiry."""
        claim = self.claim
        if claim is not None:  # ours, or abandoned: expired, or its holder is gone
            return claim.held_by(me) or not claim.alive(me, now)
        if self.owned_by(me):
            return False  # ours, waiting for our own timer
        return self.owner_is_gone(orphan_after_seconds, now)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scope": {"user_id": self.scope.user_id, "agent_name": self.scope.agent_name},
            "thread_id": self.thread_id,
            "turns": [
                [t.role, t.text, t.fingerprint, *([t.at] if t.at else [])] for t in self.turns
            ],
            "owner": {"host": self.host, "pid": self.pid, "run": self.run},
            "created": self.created,
            "first": self.since,
            "claim": None if self.claim is None else self.claim.to_json(),
            "orphan_at": self.orphan_at,
            "token": self.token,
            "v": self.version,
        }
        if self.expires is not None:
            data["expires"] = self.expires
        if self.conversation:
            data["conversation"] = self.conversation
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JournalEntry:
        scope = MemoryScope(str(data["scope"]["user_id"]), str(data["scope"]["agent_name"]))
        turns = tuple(_turn(item) for item in data["turns"])
        owner = data.get("owner") or {}
        first, expires = data.get("first"), data.get("expires")
        return cls(
            scope,
            str(data["thread_id"]),
            turns,
            str(owner.get("host", "")),
            int(owner.get("pid", 0)),
            float(data.get("created", 0.0)),
            str(owner.get("run", "")),
            str(data["conversation"]) if data.get("conversation") else None,
            None if first is None else float(first),
            None if expires is None else float(expires),
            Claim.from_json(data.get("claim")),
            str(data.get("v", "")),
        )


def _turn(item: Any) -> Turn:
    """``[role, text, fingerprint]`` or, since turns know when they were said, ``[…, at]``."""
    role, text, fingerprint, *rest = item
    at = rest[0] if rest and isinstance(rest[0], str) and rest[0] else None
    return Turn(_role(role), str(text), str(fingerprint), at)


def _role(value: Any) -> Literal["user", "assistant"]:
    if value not in ("user", "assistant"):
        raise ValueError(f"unknown turn role {value!r}")
    return "user" if value == "user" else "assistant"


# -- how an entry changes hands (pure) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryHead:
    """What a capture keeps of the entry it replaces (no turns: cheap to read)."""

    claim: Claim | None
    since: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EntryHead:
        created = float(data.get("created", 0.0))
        first = data.get("first")
        since = created if first is None else min(float(first), created)
        return cls(Claim.from_json(data.get("claim")), since)


def captured(
    old: JournalEntry | EntryHead | None, new: JournalEntry, *, version: str | None = None
) -> JournalEntry:
    """The entry after the capture ``new`` of a thread whose entry was ``old``: the newest
    capture with its owner, keeping ``old``'s claim (a run in progress stays in force: its
    holder releases it when done, and the new turns wait for it) and, while nobody has claimed
    the pending turns, the time the oldest of them was captured (``max_wait_seconds`` counts
    from it, whichever replica took which turn). PostgreSQL does the same in one statement
    (``PostgresWriter.capture_pending``). ``version``: stamp it too (one copy, not two: this
    is on the agent's path)."""
    claim, first = new.claim, new.first
    if old is not None:
        if old.claim is not None:
            claim = old.claim
        else:
            first = min(old.since, new.since)
    return JournalEntry(  # not dataclasses.replace: a fifth of the cost
        new.scope,
        new.thread_id,
        new.turns,
        new.host,
        new.pid,
        new.created,
        new.run,
        new.conversation,
        first,
        new.expires,
        claim,
        new.version if version is None else version,
    )


def claimed(entry: JournalEntry, me: Owner, now: float, lease: float) -> JournalEntry:
    """``entry`` claimed (or its claim renewed) by ``me`` until ``now + lease``."""
    return replace(entry, claim=Claim(me.run, me.host, me.pid, now + lease))


renewed = claimed
"""A held claim renewed: the same as claiming it again."""


def released(entry: JournalEntry, *, now: float | None = None) -> JournalEntry:
    """``entry`` without its claim; with ``now``, also anyone's to take over from ``now`` (a
    replica that is shutting down hands its pending work to the others at once)."""
    return replace(entry, claim=None, expires=entry.expires if now is None else now)


def with_turns(entry: JournalEntry, turns: tuple[Turn, ...]) -> JournalEntry:
    """``entry`` holding ``turns`` instead (another replica's pending turns merged in)."""
    return replace(entry, turns=turns)
