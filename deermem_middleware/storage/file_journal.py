"""The journal as JSON files: ``<root>/<user>/<agent>/<thread>.json``, one per pending thread.

An entry is written to a temp file and renamed over the previous one, so whatever stops the
write — a full disk, a short write, SIGKILL in the middle of a 1 MB entry — leaves the previous
entry whole (writing in place once destroyed it on a full disk). No ``fsync`` by default (the page
cache survives a killed process; set ``journal_fsync: true`` to survive power loss too).

Several processes on one machine may share the folder (workers of one server): every change of
an entry is a compare-and-set under an ``flock`` of the agent's folder itself (no lock file: a
file created per folder cost a fifth of a new thread's capture), so a capture never overwrites
another process's claim and two processes never both claim one thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deermem_middleware.storage.journal import PendingJournal, new_version
from deermem_middleware.storage.names import file_name
from deermem_middleware.storage.pending import EntryHead, JournalEntry, captured, pid_alive
from deermem_middleware.storage.scope import MemoryScope

__all__ = ["FileJournal"]

logger = logging.getLogger(__name__)

_TEMP_WRITER = re.compile(r"\.(\d+)-\d+\.tmp$")
"""Journal temp files are named ``.<entry>.<pid>-<thread>.tmp``."""
_ORPHAN_TEMP_SECONDS = 60.0
"""A journal temp file older than this was left by a writer that died mid-write (a write takes
milliseconds)."""

_LOCK_FDS = 256
"""Agent folders whose lock file stays open (then they are all closed and opened again)."""
_HEADS = 1024
"""Threads whose entry path and head this process remembers (then it starts over: a cache of
the threads captured lately, never a truth)."""

_UNREADABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)


def _stat_key(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _read_entry(path: Path) -> Any:
    """The JSON object at the start of an entry file (trailing bytes, if any, are ignored)."""
    text = path.read_bytes().decode("utf-8")
    value, _ = json.JSONDecoder().raw_decode(text)
    return value


class FileJournal(PendingJournal):
    """Journal entries as JSON files (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.root = Path(root).expanduser()
        self._fsync = fsync
        self._lock = threading.Lock()
        self._lock_fds: dict[Path, int] = {}
        self._paths: dict[tuple[MemoryScope, str], tuple[Path, Path]] = {}
        self._heads: dict[Path, tuple[tuple[int, int, int], EntryHead]] = {}
        """Per entry file this process wrote last, its (inode, mtime, size) then and what a
        capture keeps of it: a capture over our own entry does not read it back. Like
        ``_paths``, a bounded cache of the threads captured lately (it starts over when full:
        100,000 pending threads cost no more memory than before)."""

    def path_for(self, scope: MemoryScope, thread_id: str) -> Path:
        return self._where(scope, thread_id)[0]

    def _where(self, scope: MemoryScope, thread_id: str) -> tuple[Path, Path]:
        """The entry's file and its folder, encoded once per thread (and each ``Path``
        hashed once: building and hashing them cost as much as the lock)."""
        key = (scope, thread_id)
        found = self._paths.get(key)
        if found is None:
            if len(self._paths) >= _HEADS:
                self._paths.clear()
            folder = self.root / file_name(scope.user_id) / file_name(scope.agent_name)
            found = self._paths[key] = (folder / f"{file_name(thread_id)}.json", folder)
        return found

    def describe(self) -> str:
        return f"FileJournal({self.root})"

    # -- locking ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, folder: Path) -> Iterator[None]:
        """This process's lock, then the folder's ``flock`` (other processes). The folder
        stays open between calls (an ``open`` is a third of a capture's cost here); one that
        was removed meanwhile (a purge) is made and opened anew."""
        with self._lock:
            fd = self._lock_fd(folder)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink == 0:  # removed while we held it open: a stale inode
                fcntl.flock(fd, fcntl.LOCK_UN)
                self._drop_lock(folder)
                fd = self._lock_fd(folder)
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_fd(self, folder: Path) -> int:
        fd = self._lock_fds.get(folder)
        if fd is not None:
            return fd
        if len(self._lock_fds) >= _LOCK_FDS:
            for folder_ in list(self._lock_fds):
                self._drop_lock(folder_)
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:  # a new folder, or removed (a purge): make it again
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        self._lock_fds[folder] = fd
        return fd

    def _drop_lock(self, folder: Path) -> None:
        fd = self._lock_fds.pop(folder, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Close the lock files this journal keeps open."""
        with self._lock:
            for folder in list(self._lock_fds):
                self._drop_lock(folder)

    def __del__(self) -> None:
        for fd in getattr(self, "_lock_fds", {}).values():
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- the primitives -----------------------------------------------------------------------

    def read(self, scope: MemoryScope, thread_id: str) -> JournalEntry | None:
        return self._load(self.path_for(scope, thread_id))

    def _load(self, path: Path) -> JournalEntry | None:
        try:
            return JournalEntry.from_json(_read_entry(path))
        except FileNotFoundError:
            return None
        except _UNREADABLE as exc:
            self._set_aside(path, exc)
            return None

    def _set_aside(self, path: Path, exc: BaseException) -> None:
        aside = path.with_name(f".{path.name}.unreadable-{int(time.time())}")
        with contextlib.suppress(OSError):
            path.rename(aside)
        logger.error(
            "pending-update journal entry %s is unreadable (%s); moved to %s", path, exc, aside
        )

    def _write_if(
        self,
        scope: MemoryScope,
        thread_id: str,
        expected: str | None,
        entry: JournalEntry | None,
    ) -> bool:
        path, folder = self._where(scope, thread_id)
        with self._locked(folder):
            current = self._load(path)
            if (None if current is None else current.version) != expected:
                return False
            if entry is None:
                self._heads.pop(path, None)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            else:  # a claim changing hands needs no fsync: only turns must survive power loss
                self._write(path, entry, sync=current is None or current.turns != entry.turns)
            return True

    def capture(self, entry: JournalEntry) -> None:
        """One locked step: what the thread's entry keeps (its claim, its oldest pending
        time), then the capture written over it. The entry this process wrote last is known
        without reading it (its file is unchanged: one ``stat``), so a single process — or
        sticky sessions — pays a lock and a ``stat`` over the write.

        Raises ``OSError`` when the entry cannot be written (a full disk); the previous entry
        is then still there."""
        path, folder = self._where(entry.scope, entry.thread_id)
        with self._locked(folder):
            head = self._head(path)
            self._write(path, captured(head, entry, version=new_version()))

    def _head(self, path: Path) -> EntryHead | None:
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return None
        known = self._heads.get(path)
        if known is not None and known[0] == _stat_key(stat):
            return known[1]
        try:
            return EntryHead.from_json(_read_entry(path))
        except FileNotFoundError:
            return None
        except _UNREADABLE as exc:
            self._set_aside(path, exc)
            return None

    def _write(self, path: Path, entry: JournalEntry, *, sync: bool = True) -> None:
        """Replace the entry file atomically: the new entry whole, or the old one whole
        (``fsync`` ed when the journal is and ``sync``)."""
        payload = json.dumps(entry.to_json(), ensure_ascii=False).encode("utf-8")
        temp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                view = memoryview(payload)
                while view:  # a write can be short (a full disk, a signal): loop
                    view = view[os.write(fd, view) :]
                if self._fsync and sync:
                    os.fsync(fd)
                written = _stat_key(os.fstat(fd))
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            self._heads.pop(path, None)
            raise
        if len(self._heads) >= _HEADS:
            self._heads.clear()
        self._heads[path] = (written, EntryHead(entry.claim, entry.since))

    # -- listing ------------------------------------------------------------------------------

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
                if (writer and not pid_alive(int(writer.group(1)))) or (
                    temp.stat().st_mtime < cutoff
                ):
                    temp.unlink()

    def entries(self) -> list[JournalEntry]:
        self._remove_orphan_temps()
        found: list[JournalEntry] = []
        for path in self._files():
            entry = self._load(path)
            if entry is not None:
                found.append(entry)
        return found

    def orphans(self, now: float) -> list[JournalEntry]:
        """Entries past their :attr:`~JournalEntry.orphan_at`, read from the time each entry
        records (the turns are decoded only for those)."""
        found: list[JournalEntry] = []
        for path in self._files():
            try:
                data = _read_entry(path)
                at = data.get("orphan_at")
                if isinstance(at, int | float) and not isinstance(at, bool) and at > now:
                    continue
                entry = JournalEntry.from_json(data)
            except FileNotFoundError:
                continue
            except _UNREADABLE as exc:
                self._set_aside(path, exc)
                continue
            if entry.orphan_at <= now:
                found.append(entry)
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
        return removed
