"""Durable pending work: captures waiting for their debounce survive a crash.

A capture sits in memory for ``debounce_seconds`` (30 s by default) before its extraction runs;
a process killed in that window would lose it. So each capture is also written to a *journal
entry* — one small file per (user, agent, thread), replaced by the thread's next capture exactly
as the scheduler replaces its pending work — and the entry is removed once the update is stored.
At the next start, entries left by processes that are gone are replayed.

Replaying never applies anything twice: the update's thread watermark is stored atomically with
the memory, so turns that were already applied before the crash (a crash between saving the memory
and removing the entry) are recognised and skipped.

Cheap on the capture path: one small write plus a rename, no ``fsync`` by default (the page cache
survives a killed process; set ``journal_fsync: true`` to survive power loss too).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .filtering import Turn
from .storage.base import MemoryScope
from .storage.json_file import file_name

__all__ = [
    "FileJournal",
    "InMemoryJournal",
    "JournalEntry",
    "PendingJournal",
    "job_token",
    "process_owner",
]

logger = logging.getLogger(__name__)

_HOST = socket.gethostname()


def process_owner() -> tuple[str, int]:
    """(host, pid) of this process (after a fork, the child's own pid)."""
    return _HOST, os.getpid()


def job_token(turns: tuple[Turn, ...]) -> str:
    """Identifies one capture of a thread: its length and its newest turn."""
    return f"{len(turns)}:{turns[-1].fingerprint if turns else ''}"


@dataclass(frozen=True, slots=True)
class JournalEntry:
    scope: MemoryScope
    thread_id: str
    turns: tuple[Turn, ...]
    host: str
    pid: int
    created: float

    @property
    def token(self) -> str:
        return job_token(self.turns)

    def owner_is_gone(self, orphan_after_seconds: float, now: float | None = None) -> bool:
        """True when the process that wrote this entry cannot still be working on it."""
        host, pid = process_owner()
        if self.host == host:
            if self.pid == pid:
                return False
            return not _pid_alive(self.pid)
        # another machine: we cannot ask it; wait long enough that it must have given up
        return (now if now is not None else time.time()) - self.created > orphan_after_seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": {"user_id": self.scope.user_id, "agent_name": self.scope.agent_name},
            "thread_id": self.thread_id,
            "turns": [
                [t.role, t.text, t.fingerprint, *([t.at] if t.at else [])] for t in self.turns
            ],
            "owner": {"host": self.host, "pid": self.pid},
            "created": self.created,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JournalEntry:
        scope = MemoryScope(str(data["scope"]["user_id"]), str(data["scope"]["agent_name"]))
        turns = tuple(_turn(item) for item in data["turns"])
        owner = data.get("owner") or {}
        return cls(
            scope,
            str(data["thread_id"]),
            turns,
            str(owner.get("host", "")),
            int(owner.get("pid", 0)),
            float(data.get("created", 0.0)),
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


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_entry(path: Path) -> Any:
    """The JSON object at the start of an entry file (trailing bytes, if any, are ignored)."""
    text = path.read_bytes().decode("utf-8")
    value, _ = json.JSONDecoder().raw_decode(text)
    return value


class PendingJournal(Protocol):
    """Where pending captures are recorded until their update is stored."""

    def put(self, scope: MemoryScope, thread_id: str, turns: tuple[Turn, ...]) -> None:
        """Record (replace) the pending capture of this thread."""
        ...

    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        """Remove the entry if it is still the capture identified by ``token``."""
        ...

    def entries(self) -> list[JournalEntry]:
        """Every recorded entry (unreadable ones are set aside and logged)."""
        ...

    def forget(self, scope: MemoryScope) -> int:
        """Remove every entry of ``scope``; returns how many."""
        ...


class InMemoryJournal:
    """A journal that lives as long as the process (for storages that are not durable either)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[MemoryScope, str], JournalEntry] = {}
        self._lock = threading.Lock()

    def put(self, scope: MemoryScope, thread_id: str, turns: tuple[Turn, ...]) -> None:
        host, pid = process_owner()
        with self._lock:
            self._entries[(scope, thread_id)] = JournalEntry(
                scope, thread_id, turns, host, pid, time.time()
            )

    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        with self._lock:
            entry = self._entries.get((scope, thread_id))
            if entry is not None and entry.token == token:
                del self._entries[(scope, thread_id)]

    def entries(self) -> list[JournalEntry]:
        with self._lock:
            return list(self._entries.values())

    def forget(self, scope: MemoryScope) -> int:
        with self._lock:
            keys = [k for k in self._entries if k[0] == scope]
            for key in keys:
                del self._entries[key]
            return len(keys)


class FileJournal:
    """Journal entries as JSON files: ``<root>/<user>/<agent>/<thread>.json``."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.root = Path(root).expanduser()
        self._fsync = fsync
        self._lock = threading.Lock()
        self._made: set[Path] = set()

    def path_for(self, scope: MemoryScope, thread_id: str) -> Path:
        return (
            self.root
            / file_name(scope.user_id)
            / file_name(scope.agent_name)
            / f"{file_name(thread_id)}.json"
        )

    def put(self, scope: MemoryScope, thread_id: str, turns: tuple[Turn, ...]) -> None:
        host, pid = process_owner()
        entry = JournalEntry(scope, thread_id, turns, host, pid, time.time())
        path = self.path_for(scope, thread_id)
        payload = json.dumps(entry.to_json(), ensure_ascii=False).encode("utf-8")
        with self._lock:
            folder = path.parent
            if folder not in self._made:
                folder.mkdir(parents=True, exist_ok=True)
                self._made.add(folder)
            # Overwrite in place, then cut to length: one write syscall (a killed process
            # cannot tear it) and no rename — ~10 µs instead of ~200 µs for temp + replace on
            # the capture path. A reader ignores bytes after the JSON object (a crash between the
            # write and the truncate of a shorter entry).
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            except FileNotFoundError:  # the folder was removed (forget): make it again
                folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.pwrite(fd, payload, 0)
                os.ftruncate(fd, len(payload))
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)

    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        path = self.path_for(scope, thread_id)
        with self._lock:
            try:
                current = JournalEntry.from_json(_read_entry(path))
            except FileNotFoundError:
                return
            except (OSError, ValueError, KeyError, TypeError):
                current = None
            if current is None or current.token == token:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _files(self) -> Iterator[Path]:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*/*/*.json")):
            if not path.name.startswith("."):
                yield path

    def entries(self) -> list[JournalEntry]:
        found: list[JournalEntry] = []
        for path in self._files():
            try:
                found.append(JournalEntry.from_json(_read_entry(path)))
            except FileNotFoundError:
                continue  # finished meanwhile
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                aside = path.with_name(f".{path.name}.unreadable-{int(time.time())}")
                with contextlib.suppress(OSError):
                    path.rename(aside)
                logger.error(
                    "pending-update journal entry %s is unreadable (%s); moved to %s",
                    path,
                    exc,
                    aside,
                )
        return found

    def forget(self, scope: MemoryScope) -> int:
        folder = self.root / file_name(scope.user_id) / file_name(scope.agent_name)
        removed = 0
        with self._lock:
            if not folder.is_dir():
                return 0
            for path in folder.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
            self._made.discard(folder)
        return removed
