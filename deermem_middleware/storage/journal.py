"""Durable pending work: captures waiting for their debounce survive a crash.

A capture sits in memory for ``debounce_seconds`` (30 s by default) before its extraction runs;
a process killed in that window would lose it. So each capture is also written to a *journal
entry* — one small file per (user, agent, thread), replaced by the thread's next capture exactly
as the scheduler replaces its pending work — and the entry is removed once the update is stored.
At the next start, entries left by processes that are gone are replayed.

Replaying never applies anything twice: the update's thread watermark is stored atomically with
the memory, so turns that were already applied before the crash (a crash between saving the memory
and removing the entry) are recognised and skipped.

An entry is written to a temp file and renamed over the previous one, so whatever stops the
write — a full disk, a short write, SIGKILL in the middle of a 1 MB entry — leaves the previous
entry whole (writing in place once destroyed it on a full disk). No ``fsync`` by default (the page
cache survives a killed process; set ``journal_fsync: true`` to survive power loss too).

Whose entry is it? Each entry records the host, the pid *and a token drawn once per process*: a
container restarted with the same pid (an entrypoint running as pid 1) is a new process with a
new token, so it replays its dead predecessor's entries instead of taking them for its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from deermem_middleware.memory.conversation import Turn
from deermem_middleware.storage.base import MemoryScope
from deermem_middleware.storage.json_file import file_name

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


_RUN: tuple[int, str] = (0, "")
_TEMP_WRITER = re.compile(r"\.(\d+)-\d+\.tmp$")
"""Journal temp files are named ``.<entry>.<pid>-<thread>.tmp``."""
_ORPHAN_TEMP_SECONDS = 60.0
"""A journal temp file older than this was left by a writer that died mid-write (a write takes
milliseconds)."""


def process_owner() -> tuple[str, int, str]:
    """(host, pid, run token) of this process. The token is new in every process (after a
    fork, the child draws its own), so a later process that gets the same pid — a restarted
    container's pid 1 — is told apart from the one that wrote an entry."""
    global _RUN
    pid = os.getpid()
    if _RUN[0] != pid:
        _RUN = (pid, secrets.token_hex(8))
    return _HOST, pid, _RUN[1]


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
    run: str = ""
    """The writing process's run token (:func:`process_owner`); "" in entries written before
    tokens existed."""
    conversation: str | None = None
    """The progress key of a capture without a thread id (see ``CaptureJob.conversation``)."""

    @classmethod
    def mine(
        cls,
        scope: MemoryScope,
        thread_id: str,
        turns: tuple[Turn, ...],
        conversation: str | None = None,
    ) -> JournalEntry:
        """An entry owned by this process, written now."""
        host, pid, run = process_owner()
        return cls(scope, thread_id, turns, host, pid, time.time(), run, conversation)

    @property
    def token(self) -> str:
        return job_token(self.turns)

    def owner_is_gone(self, orphan_after_seconds: float, now: float | None = None) -> bool:
        """True when the process that wrote this entry cannot still be working on it."""
        host, pid, run = process_owner()
        if self.host == host:
            if self.pid == pid:
                return self.run != run  # same pid, another process: a predecessor's entry
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
            "owner": {"host": self.host, "pid": self.pid, "run": self.run},
            "created": self.created,
            **({"conversation": self.conversation} if self.conversation else {}),
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
            str(owner.get("run", "")),
            str(data["conversation"]) if data.get("conversation") else None,
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


class PendingJournal(ABC):
    """Where pending captures are recorded until their update is stored: one entry per
    (scope, thread), replaced whole by the thread's next capture. A journal implements
    :meth:`replace`, :meth:`done`, :meth:`entries` and :meth:`forget`; :meth:`put` is shared."""

    def put(
        self,
        scope: MemoryScope,
        thread_id: str,
        turns: tuple[Turn, ...],
        conversation: str | None = None,
    ) -> None:
        """Record (replace) the pending capture of this thread, owned by this process."""
        self.replace(JournalEntry.mine(scope, thread_id, turns, conversation))

    @abstractmethod
    def replace(self, entry: JournalEntry) -> None:
        """Store ``entry`` in place of its thread's previous one."""

    @abstractmethod
    def done(self, scope: MemoryScope, thread_id: str, token: str) -> None:
        """Remove the entry if it is still the capture identified by ``token``."""

    @abstractmethod
    def entries(self) -> list[JournalEntry]:
        """Every recorded entry (unreadable ones are set aside and logged)."""

    @abstractmethod
    def forget(self, scope: MemoryScope) -> int:
        """Remove every entry of ``scope``; returns how many."""


class InMemoryJournal(PendingJournal):
    """A journal that lives as long as the process (for storages that are not durable either)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[MemoryScope, str], JournalEntry] = {}
        self._lock = threading.Lock()

    def replace(self, entry: JournalEntry) -> None:
        with self._lock:
            self._entries[(entry.scope, entry.thread_id)] = entry

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


class FileJournal(PendingJournal):
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

    def replace(self, entry: JournalEntry) -> None:
        """Replace the thread's entry atomically: the new entry whole, or the old one whole.

        Raises ``OSError`` when the entry cannot be written (a full disk); the previous entry
        is then still there."""
        path = self.path_for(entry.scope, entry.thread_id)
        payload = json.dumps(entry.to_json(), ensure_ascii=False).encode("utf-8")
        temp = path.with_name(f".{path.name}.{entry.pid}-{threading.get_ident()}.tmp")
        with self._lock:
            folder = path.parent
            if folder not in self._made:
                folder.mkdir(parents=True, exist_ok=True)
                self._made.add(folder)
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            except FileNotFoundError:  # the folder was removed (forget): make it again
                folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                try:
                    view = memoryview(payload)
                    while view:  # a write can be short (a full disk, a signal): loop
                        view = view[os.write(fd, view) :]
                    if self._fsync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    temp.unlink()
                raise

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

    def _remove_orphan_temps(self) -> None:
        """Temp files of writers that died mid-write (never read as entries): their writer's
        pid (in the name) is gone, or they are older than any write takes."""
        if not self.root.is_dir():
            return
        cutoff = time.time() - _ORPHAN_TEMP_SECONDS
        for temp in self.root.glob("*/*/.*.tmp"):
            writer = _TEMP_WRITER.search(temp.name)
            with contextlib.suppress(OSError):
                if (writer and not _pid_alive(int(writer.group(1)))) or (
                    temp.stat().st_mtime < cutoff
                ):
                    temp.unlink()

    def entries(self) -> list[JournalEntry]:
        self._remove_orphan_temps()
        found: list[JournalEntry] = []
        for path in self._files():
            try:
                found.append(JournalEntry.from_json(_read_entry(path)))
            except FileNotFoundError:
                continue  # finished meanwhile
            except (
                OSError,
                ValueError,
                KeyError,
                TypeError,
                AttributeError,
                RecursionError,
            ) as exc:
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
                # every file goes; only entries count: not an entry set aside as unreadable
                # (``.<name>.unreadable-<time>``), nor a write in progress (``.<name>.tmp``)
                entry = path.suffix == ".json" and not path.name.startswith(".")
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += entry
            self._made.discard(folder)
        return removed
