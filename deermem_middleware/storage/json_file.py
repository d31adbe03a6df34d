"""JSON files on local disk: the embedded default, no server needed.

One file per scope: ``<storage_path>/users/<user>/<agent>.json`` (names percent-encoded so any id
is a safe file name; very long ids become a prefix plus a hash, and every document records its
own user and agent ids). Each save

1. takes a per-file lock (a ``threading.Lock`` inside the process, ``flock`` on a ``.lock``
   sidecar across processes),
2. re-reads the revision on disk and raises :class:`RevisionConflict` if it moved,
3. writes a temp file in the same folder, ``fsync``s it, ``os.replace``s it over the document and
   ``fsync``s the folder — a crash at any moment leaves either the old or the new document, never
   a torn one.

Reads are cached by the file's identity (inode, mtime_ns, ctime_ns, size), for the most
recently read documents (:data:`CACHE_DOCUMENTS`); documents are frozen models, so the cached
object is shared safely. :meth:`JSONFileStorage.revision` answers from a ``stat`` (and, for a
document this process has not read, the file's first bytes, where the revision is written).

**Derived data** lives in a sidecar per revision, written before the document (see
:mod:`.json_derived`).

A document whose facts do not all validate is read one fact at a time (see
:func:`~deermem_middleware.formats.interchange.repair_document`): what DeerFlow's loaders accept
is repaired, a fact that cannot be read is kept aside inside the document, and a WARNING names the
file and each fact. A file that fails to parse at all is never overwritten. By default
(``on_corruption="quarantine"``) it is renamed aside to ``<name>.corrupted-<UTC time>`` in the same
folder — kept for a person to inspect or restore — an error naming both paths is logged, and the
user starts from an empty memory instead of losing every future update. With
``on_corruption="raise"`` it stays in place and every read raises :class:`CorruptedMemoryError`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from deermem_middleware.memory.document import DocumentFormatError, Memory, parse_document_json
from deermem_middleware.storage.base import (
    CorruptedMemoryError,
    Derive,
    MemoryScope,
    MemoryStorage,
    Mutate,
    PurgeReceipt,
    RevisionConflict,
    StoredMemory,
    prepare_write,
)
from deermem_middleware.storage.file_journal import FileJournal
from deermem_middleware.storage.journal import PendingJournal
from deermem_middleware.storage.json_derived import (
    DERIVED_SUFFIX,
    derived_path,
    remove_derived,
    with_derived,
)
from deermem_middleware.storage.names import decode_name, encode_name, file_name

try:  # POSIX only; elsewhere the in-process lock still applies
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None  # type: ignore[assignment]

__all__ = ["JSONFileStorage", "decode_name", "encode_name", "is_file_of"]

logger = logging.getLogger(__name__)

REVISION_KEY = "revision"
SCOPE_KEY = "scope"
"""Whose document this is, stored in the file so hashed (very long) names stay listable."""


_QUARANTINED = re.compile(r"\.corrupted-\d{8}T\d{12}Z")
_TEMP = re.compile(r"(?:\.derived-\d{1,19})?\.[A-Za-z0-9_]+\.tmp")
_HEAD_REVISION = re.compile(rb'\A\s*\{\s*"revision"\s*:\s*(\d{1,19})\s*[,}]')

CACHE_DOCUMENTS = 256
"""Documents (with their derived data) kept read in the process, most recently used first."""


def is_file_of(name: str, document: str) -> bool:
    """True when the file ``name`` is the document ``document`` or one of the files this storage
    writes beside it: its ``.lock``, a quarantined ``.corrupted-<UTC time>`` copy, a
    ``.<document>.<random>.tmp`` write in progress. Exact shapes, not a prefix: agent
    ``coder``'s ``coder.json.`` prefix also starts agent ``coder.json``'s document
    (``coder.json.json``) and agent ``coder.json.v2``'s, and forgetting ``coder`` deleted them.
    Its derived data (``.derived-<revision>``) belongs to it too."""
    if name in (document, f"{document}.lock"):
        return True
    if name.startswith(f"{document}."):
        rest = name[len(document) :]
        quarantined = _QUARANTINED.fullmatch(rest) is not None
        return quarantined or DERIVED_SUFFIX.fullmatch(rest) is not None
    if name.startswith(f".{document}."):
        return _TEMP.fullmatch(name[len(document) + 1 :]) is not None
    return False


def _file_key(stat: os.stat_result) -> tuple[int, int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)


class JSONFileStorage(MemoryStorage):
    """Memory documents as JSON files under ``root`` (see the module docstring)."""

    stores_derived = True

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = True,
        on_corruption: Literal["quarantine", "raise"] = "quarantine",
    ) -> None:
        if on_corruption not in ("quarantine", "raise"):
            raise ValueError(
                f"on_corruption must be 'quarantine' or 'raise', got {on_corruption!r}"
            )
        self.root = Path(root).expanduser()
        self.pending_root = self.root / "pending"
        """Where :meth:`journal` keeps pending captures (swept by :meth:`purge`)."""
        self._fsync = fsync
        self.on_corruption = on_corruption
        self._cache: OrderedDict[Path, tuple[tuple[int, int, int, int], StoredMemory]] = (
            OrderedDict()
        )
        self._cache_lock = threading.Lock()
        self._path_locks: dict[Path, threading.Lock] = {}

    # -- paths ------------------------------------------------------------------------------

    def path_for(self, scope: MemoryScope) -> Path:
        return (
            self.root / "users" / file_name(scope.user_id) / f"{file_name(scope.agent_name)}.json"
        )

    def describe(self, scope: MemoryScope) -> str:
        return str(self.path_for(scope))

    # -- reading ----------------------------------------------------------------------------

    def load(self, scope: MemoryScope) -> StoredMemory:
        path = self.path_for(scope)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return StoredMemory(Memory(), 0)
        key = _file_key(stat)
        with self._cache_lock:
            cached = self._cache.get(path)
            if cached is not None:
                self._cache.move_to_end(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            stored, key = self._read(path)
        except CorruptedMemoryError:
            if self.on_corruption == "raise":
                raise
            with self._locked(path):
                stored, key = self._read_or_quarantine(path, scope)
        if stored is None:
            return StoredMemory(Memory(), 0)
        self._remember(path, key, stored)
        return stored

    def _remember(self, path: Path, key: tuple[int, int, int, int], stored: StoredMemory) -> None:
        with self._cache_lock:
            self._cache[path] = (key, stored)
            self._cache.move_to_end(path)
            while len(self._cache) > CACHE_DOCUMENTS:
                self._cache.popitem(last=False)

    def revision(self, scope: MemoryScope) -> int:
        """From a ``stat`` when this process read the document as it is; else from the
        file's first bytes, where every document this storage writes starts with its revision
        (a full read when they do not say)."""
        path = self.path_for(scope)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return 0
        key = _file_key(stat)
        with self._cache_lock:
            cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1].revision
        try:
            with open(path, "rb") as handle:
                head = handle.read(256)
        except FileNotFoundError:
            return 0
        found = _HEAD_REVISION.match(head)
        return int(found.group(1)) if found else self.load(scope).revision

    def _read(self, path: Path) -> tuple[StoredMemory | None, tuple[int, int, int, int]]:
        try:
            with open(path, "rb") as handle:
                key = _file_key(os.fstat(handle.fileno()))
                raw = handle.read()
        except FileNotFoundError:
            return None, (0, 0, 0, 0)
        return with_derived(path, self._parse(path, raw)), key

    def _read_or_quarantine(
        self, path: Path, scope: MemoryScope
    ) -> tuple[StoredMemory | None, tuple[int, int, int, int]]:
        """Under the file lock: read, and move a corrupted document aside (see module doc)."""
        try:
            return self._read(path)
        except CorruptedMemoryError as exc:
            if self.on_corruption == "raise":
                raise
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            aside = path.with_name(f"{path.name}.corrupted-{stamp}")
            os.replace(path, aside)
            if self._fsync:
                self._fsync_dir(path.parent)
            with self._cache_lock:
                self._cache.pop(path, None)
            remove_derived(path, keep=())
            logger.error(
                "memory of user %r / agent %r: %s; it was moved aside to %s (kept for inspection) "
                "and the user starts from an empty memory",
                scope.user_id,
                scope.agent_name,
                exc.reason,
                aside,
            )
            return None, (0, 0, 0, 0)

    @staticmethod
    def _parse(path: Path, raw: bytes) -> StoredMemory:
        try:
            data = parse_document_json(raw)
        except DocumentFormatError as exc:
            raise CorruptedMemoryError(path, str(exc)) from exc
        if not isinstance(data, dict):
            raise CorruptedMemoryError(
                path, f"top level is {type(data).__name__}, expected an object"
            )
        revision = data.pop(REVISION_KEY, 0)
        data.pop(SCOPE_KEY, None)
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise CorruptedMemoryError(
                path, f"'{REVISION_KEY}' must be a non-negative integer, got {revision!r}"
            )
        try:
            memory = Memory.from_json_dict(data)
        except ValidationError:
            memory = JSONFileStorage._repaired(path, data)
        return StoredMemory(memory, revision)

    @staticmethod
    def _repaired(path: Path, data: dict[str, Any]) -> Memory:
        """A document that does not validate as is, read one fact at a time: a fact DeerFlow
        would accept (no id, a ``null`` confidence, facts as an id map) is repaired, one that
        cannot be read is set aside under ``droppedFacts`` in the document (kept on the next
        save: nothing stored is lost); a WARNING names the file and each fact."""
        from deermem_middleware.formats.repair import repair_document

        try:
            memory, report = repair_document(data, where=str(path), keep_dropped=True)
        except DocumentFormatError as exc:  # pragma: no cover - data is an object here
            raise CorruptedMemoryError(path, str(exc)) from exc
        for line in report.lines():
            logger.warning(
                "memory document %s (repaired on load; saved so on the next write)", line
            )
        return memory

    # -- writing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        with self._cache_lock:
            lock = self._path_locks.setdefault(path, threading.Lock())
        with lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            if fcntl is None:
                yield
                return
            lock_path = path.with_name(path.name + ".lock")
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        path = self.path_for(scope)
        with self._locked(path):
            current, key = self._read_or_quarantine(path, scope)  # never overwrites a bad file
            actual = current.revision if current is not None else 0
            if actual != expected_revision:
                if current is not None:  # what we just read is the freshest: the retry uses it
                    self._remember(path, key, current)
                raise RevisionConflict(scope, expected_revision, actual)
            return self._store_locked(scope, path, memory, actual + 1, derived)

    def update(
        self,
        scope: MemoryScope,
        mutate: Mutate,
        *,
        max_conflicts: int = 200,
        derive: Derive | None = None,
    ) -> int:
        """Read, ``mutate`` and write the document under the file lock, as one step: writers in
        other processes wait instead of conflicting (``max_conflicts`` is never reached).
        ``mutate`` returning None or the document itself writes nothing (unless ``derive`` has
        new derived data for it). Returns the revision after the call."""
        path = self.path_for(scope)
        with self._locked(path):
            current, _ = self._read_or_quarantine(path, scope)
            stored = current if current is not None else StoredMemory(Memory(), 0)
            step = prepare_write(self, stored, mutate, derive)
            if step is None:
                return stored.revision
            memory, derived = step
            return self._store_locked(scope, path, memory, stored.revision + 1, derived)

    def journal(self, *, fsync: bool = False) -> PendingJournal:
        """One file per pending thread under :attr:`pending_root` (see
        :mod:`deermem_middleware.storage.journal`)."""
        return FileJournal(self.pending_root, fsync=fsync)

    def _store_locked(
        self,
        scope: MemoryScope,
        path: Path,
        memory: Memory,
        revision: int,
        derived: bytes | None = None,
    ) -> int:
        document: dict[str, Any] = {
            REVISION_KEY: revision,
            SCOPE_KEY: {"user_id": scope.user_id, "agent_name": scope.agent_name},
            **memory.to_json_dict(),
        }
        payload = json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8")
        self._remove_orphan_temps(path)
        if derived is not None:  # first: a document never names a revision without its data
            self._write_atomically(derived_path(path, revision), derived)
        self._write_atomically(path, payload)
        if derived is not None:
            remove_derived(path, keep=(revision, revision - 1))
            stored = StoredMemory(memory, revision, derived, revision)
        else:
            stored = with_derived(path, StoredMemory(memory, revision))
        try:
            key = _file_key(path.stat())
        except FileNotFoundError:  # pragma: no cover - deleted under our feet
            return revision
        self._remember(path, key, stored)
        return revision

    @staticmethod
    def _remove_orphan_temps(path: Path) -> None:
        """Temp files of this document left by a writer that was killed mid-write. Only writers
        holding the document's exclusive lock create them, and we hold it: all are orphans."""
        for orphan in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                orphan.unlink()

    def _write_atomically(self, path: Path, payload: bytes) -> None:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                if self._fsync:
                    os.fsync(handle.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
        if self._fsync:
            self._fsync_dir(path.parent)

    @staticmethod
    def _fsync_dir(folder: Path) -> None:
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:  # pragma: no cover - platforms without directory fds
            return
        try:
            os.fsync(fd)
        except OSError:  # pragma: no cover
            pass
        finally:
            os.close(fd)

    # -- housekeeping -----------------------------------------------------------------------

    def delete(self, scope: MemoryScope) -> bool:
        path = self.path_for(scope)
        with self._locked(path):
            with self._cache_lock:
                self._cache.pop(path, None)
            remove_derived(path, keep=())
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            if self._fsync:
                self._fsync_dir(path.parent)
            return True

    @staticmethod
    def _recorded_scope(doc: Path) -> MemoryScope | None:
        try:
            recorded = json.loads(doc.read_bytes()).get(SCOPE_KEY) or {}
            return MemoryScope(str(recorded["user_id"]), str(recorded["agent_name"]))
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            logger.warning("cannot tell whose memory %s is; skipped in listings", doc)
            return None

    def list_scopes(self) -> list[MemoryScope]:
        scopes: list[MemoryScope] = []
        users = self.root / "users"
        if not users.is_dir():
            return scopes
        for user_dir in sorted(users.iterdir()):
            if not user_dir.is_dir():
                continue
            for doc in sorted(user_dir.glob("*.json")):
                if doc.name.startswith("."):
                    continue
                if "~" in user_dir.name or "~" in doc.stem:
                    scope = self._recorded_scope(doc)
                    if scope is not None:
                        scopes.append(scope)
                    continue
                scopes.append(MemoryScope(decode_name(user_dir.name), decode_name(doc.stem)))
        return scopes

    def purge(self, user_id: str, agent_name: str | None = None) -> PurgeReceipt:
        """The documents (see :meth:`MemoryStorage.purge`), then what else names the user:
        quarantined copies, lock and temp files, journal files, and the folders left empty."""
        receipt = super().purge(user_id, agent_name)
        user = file_name(user_id)
        documents, pending = self.root / "users" / user, self.pending_root / user
        if agent_name is None:
            self._remove_tree(documents, receipt)
            self._remove_tree(pending, receipt)
            return receipt
        agent = file_name(agent_name)
        copies = sorted(documents.iterdir()) if documents.is_dir() else []
        copies = [p for p in copies if is_file_of(p.name, f"{agent}.json")]
        for folder, doomed in ((documents, copies), (pending, [pending / agent])):
            for path in doomed:
                self._remove_tree(path, receipt)
            with contextlib.suppress(OSError):
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
                    receipt.add(f"folder {folder.relative_to(self.root)}")
        return receipt

    def _remove_tree(self, path: Path, receipt: PurgeReceipt) -> None:
        """Delete ``path`` with every file under it (listing each), folders deepest first."""
        if not path.exists():
            return
        inside: list[Path] = []
        if path.is_dir() and not path.is_symlink():
            inside = sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True)
        for item in (*inside, path):
            if item.is_dir() and not item.is_symlink():
                item.rmdir()
                receipt.add(f"folder {item.relative_to(self.root)}")
            else:
                item.unlink()
                receipt.files += 1
                receipt.add(f"file {item.relative_to(self.root)}")
