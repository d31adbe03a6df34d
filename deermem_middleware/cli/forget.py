"""``deermem forget``: erase a user (documents, pending captures, quarantined copies, locks, keys)
or one fact, with a receipt."""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope

from deermem_middleware.cli.common import (
    EXIT_DECLINED,
    UsageError,
    _find_fact,
    _opened,
    _storage_where,
    _who,
)
from deermem_middleware.cli.facts import _remove_fact

__all__: list[str] = []  # private: the command is the interface


@dataclass
class _Receipt:
    """What ``forget`` deleted, line by line, for the person to keep."""

    lines: list[str] = field(default_factory=list)
    documents: int = 0
    facts: int = 0
    pending: int = 0
    files: int = 0
    keys: int = 0

    def add(self, line: str) -> None:
        self.lines.append(line)


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _forget(args: argparse.Namespace) -> int:
    if args.fact is not None:
        return _forget_fact(args)
    if args.user is None:
        raise UsageError("forget: name what to erase: --user U [--agent A], or --fact ID")
    with _opened(args) as middleware:
        scopes = _user_scopes(middleware, args.user, args.agent)
        if not args.yes:
            agents = ", ".join(s.agent_name for s in scopes) or "none stored"
            what = f"agent {args.agent!r}" if args.agent else f"every agent ({agents})"
            if not _confirm(
                f"Erase the memory of user {args.user!r} for {what}: documents, pending "
                "captures and leftover files? This cannot be undone."
            ):
                print("nothing deleted", file=sys.stderr)
                return EXIT_DECLINED
        receipt = _Receipt()
        texts: list[str] = []
        stored = set(middleware.storage.list_scopes())
        for scope in scopes:
            texts.extend(_forget_scope(middleware, scope, scope in stored, receipt))
        _sweep_files(middleware, args.user, args.agent, receipt)
        _sweep_store(middleware, args.user, args.agent, receipt)
        embeddings = middleware.selector.embeddings
        if embeddings is not None and texts:
            embeddings.forget(texts)
            receipt.add(f"embedding cache: dropped the vectors of {len(texts)} fact text(s)")
        where = _storage_where(middleware.storage)
    scope_text = f"agent {args.agent!r}" if args.agent else "all agents"
    print(f"forgot user {args.user!r} ({scope_text}) in {where}:")
    for line in receipt.lines or ["nothing was stored for this user"]:
        print(f"  {line}")
    print(
        f"total: {receipt.documents} document(s), {receipt.facts} fact(s), {receipt.pending} "
        f"pending capture(s), {receipt.files} other file(s), {receipt.keys} other key(s)"
    )
    return 0


def _user_scopes(middleware: MemoryService, user_id: str, agent: str | None) -> list[MemoryScope]:
    """Every scope of ``user_id`` (one agent's, with ``agent``) with a document or pending work."""
    from deermem_middleware.storage.base import MemoryScope

    found = {s for s in middleware.storage.list_scopes() if s.user_id == user_id}
    if middleware.journal is not None:
        found.update(e.scope for e in middleware.journal.entries() if e.scope.user_id == user_id)
    if agent is not None:
        agent_name = middleware.scope(user_id).agent_name
        found = {s for s in found if s.agent_name == agent_name}
        found.add(MemoryScope(user_id, agent_name))  # its leftovers are swept even without a doc
    return sorted(found)


def _forget_scope(
    middleware: MemoryService, scope: MemoryScope, stored: bool, receipt: _Receipt
) -> list[str]:
    """Delete the document (when ``stored``) and the pending captures of ``scope``; returns the
    deleted fact texts. A scope without a document is not touched: deleting it would create
    the lock file and folder it is about to sweep."""
    from deermem_middleware.storage.base import CorruptedMemoryError

    storage = middleware.storage
    texts: list[str] = []
    revision: int | None = None
    if stored:
        try:
            loaded = storage.load(scope)
            texts = [f.content for f in loaded.memory.facts]
            revision = loaded.revision
        except CorruptedMemoryError:
            pass  # unreadable: deleted all the same
    where = storage.describe(scope)
    if stored and storage.delete(scope):
        receipt.documents += 1
        receipt.facts += len(texts)
        state = f"revision {revision}, " if revision is not None else "unreadable, "
        receipt.add(f"document {where} ({state}{len(texts)} fact(s))")
    if middleware.journal is not None:
        pending = middleware.journal.forget(scope)
        if pending:
            receipt.pending += pending
            receipt.add(f"pending captures of agent {scope.agent_name!r}: {pending}")
    middleware.selector.forget(scope)
    return texts


def _remove_tree(path: Path, root: Path, receipt: _Receipt) -> None:
    """Delete every file under ``path`` (listing each) and the folders, deepest first."""
    if not path.exists():
        return
    if path.is_file() or path.is_symlink():
        path.unlink()
        receipt.files += 1
        receipt.add(f"file {path.relative_to(root)}")
        return
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if child.is_dir() and not child.is_symlink():
            child.rmdir()
            receipt.add(f"folder {child.relative_to(root)}")
        else:
            child.unlink()
            receipt.files += 1
            receipt.add(f"file {child.relative_to(root)}")
    path.rmdir()
    receipt.add(f"folder {path.relative_to(root)}")


def _remove_if_empty(folder: Path, root: Path, receipt: _Receipt) -> None:
    with contextlib.suppress(OSError):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            receipt.add(f"folder {folder.relative_to(root)}")


def _sweep_files(
    middleware: MemoryService, user_id: str, agent: str | None, receipt: _Receipt
) -> None:
    """JSON-file storage: quarantined copies, lock and temp files, pending files, empty folders."""
    from deermem_middleware.storage.journal import FileJournal
    from deermem_middleware.storage.json_file import JSONFileStorage, file_name

    storage = middleware.storage
    if not isinstance(storage, JSONFileStorage):
        return
    root = storage.root
    user_folder = root / "users" / file_name(user_id)
    if not user_id or user_folder.parent != root / "users":
        raise UsageError(f"--user: {user_id!r} does not name one user's folder")
    pending_root = middleware.journal.root if isinstance(middleware.journal, FileJournal) else None
    if agent is None:
        _remove_tree(user_folder, root, receipt)
        if pending_root is not None:
            _remove_tree(pending_root / file_name(user_id), root, receipt)
        return
    stem = f"{file_name(middleware.scope(user_id).agent_name)}.json"
    if user_folder.is_dir():
        for path in sorted(user_folder.iterdir()):
            name = path.name
            if name.startswith((f"{stem}.", f".{stem}.")) or name == stem:
                _remove_tree(path, root, receipt)
        _remove_if_empty(user_folder, root, receipt)
    if pending_root is not None:
        user_pending = pending_root / file_name(user_id)
        _remove_tree(user_pending / file_name(middleware.scope(user_id).agent_name), root, receipt)
        _remove_if_empty(user_pending, root, receipt)


def _sweep_store(
    middleware: MemoryService, user_id: str, agent: str | None, receipt: _Receipt
) -> None:
    """LangGraph-store storage: every remaining key of the user (quarantined documents too)."""
    from deermem_middleware.storage.store import StoreStorage, label

    storage = middleware.storage
    if not isinstance(storage, StoreStorage):
        return
    store = storage.store
    agent_label = label(middleware.scope(user_id).agent_name) if agent is not None else None
    for kind in ("memory", "pending"):
        prefix: tuple[str, ...] = (storage.prefix, kind, label(user_id))
        if agent_label is not None:
            prefix = (*prefix, agent_label)
        seen: set[tuple[tuple[str, ...], str]] = set()
        while True:
            items = [
                i for i in store.search(prefix, limit=1000) if (i.namespace, i.key) not in seen
            ]
            if not items:  # all gone (or a store that does not delete: do not spin)
                break
            for item in items:
                seen.add((item.namespace, item.key))
                store.delete(item.namespace, item.key)
                receipt.keys += 1
                receipt.add(f"key {'/'.join(item.namespace)}/{item.key}")


def _forget_fact(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user or "default")
        fact = _find_fact(middleware.storage.load(scope).memory, args.fact, scope)
        if not args.yes and not _confirm(
            f"Erase fact {fact.id} ({fact.content!r}) from the memory of {_who(scope)}?"
        ):
            print("nothing deleted", file=sys.stderr)
            return EXIT_DECLINED
        removed, revision = _remove_fact(middleware, scope, args.fact)
        where = middleware.storage.describe(scope)
    print(f"forgot fact {removed.id} of {_who(scope)}:")
    print(f"  deleted from {where} (now revision {revision}): {removed.content}")
    print("  embedding cache and selection index of this document dropped")
    return 0
