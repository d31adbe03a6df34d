"""The derived-data sidecars of JSON documents (:mod:`.json_file`).

Derived data (:attr:`~deermem_middleware.storage.base.MemoryStorage.stores_derived`) lives
in a sidecar named after the revision it was written with, ``<agent>.json.derived-<revision>``,
written (atomically, like the document) *before* the document that names that revision: a
crash between the two leaves a sidecar of a revision that never came (removed by the next
write) and the old document with its own sidecar — never a document that points at data that is
not there. The sidecar of the previous revision is kept until the next write, so a reader that
loaded the document just before a write still finds its own; older ones are removed. A document
written without derived data keeps the newest sidecar, which then says which revision it was
made for (the reader reuses it fact by fact).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Final

from deermem_middleware.storage.base import StoredMemory

__all__ = ["DERIVED_SUFFIX", "derived_files", "derived_path", "remove_derived", "with_derived"]

DERIVED_SUFFIX: Final = re.compile(r"\.derived-(\d{1,19})")
"""What follows a document's file name in the name of one of its sidecars."""


def derived_path(path: Path, revision: int) -> Path:
    """The sidecar of the document at ``path`` for ``revision``."""
    return path.with_name(f"{path.name}.derived-{revision}")


def derived_files(path: Path) -> dict[int, Path]:
    """The sidecars of the document at ``path``, by revision."""
    found: dict[int, Path] = {}
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return found
    prefix = path.name
    for name in names:
        if name.startswith(prefix):
            match = DERIVED_SUFFIX.fullmatch(name[len(prefix) :])
            if match is not None:
                found[int(match.group(1))] = path.parent / name
    return found


def with_derived(path: Path, stored: StoredMemory) -> StoredMemory:
    """``stored`` with its revision's derived data — or, when that revision has none, the
    newest there is, marked with the revision it was written for (stale: reused by text)."""
    candidates = [(stored.revision, derived_path(path, stored.revision))]
    for revision, other in sorted(derived_files(path).items(), reverse=True):
        if revision != stored.revision:
            candidates.append((revision, other))
    for revision, where in candidates:
        try:
            data = where.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue
        return StoredMemory(stored.memory, stored.revision, data, revision)
    return stored


def remove_derived(path: Path, keep: tuple[int, ...]) -> None:
    """The document's sidecars of other revisions than ``keep`` (older ones, and those of a
    revision a crashed writer never stored)."""
    for revision, where in derived_files(path).items():
        if revision not in keep:
            with contextlib.suppress(FileNotFoundError):
                where.unlink()
