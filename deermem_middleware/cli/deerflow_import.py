"""``deermem import --deerflow DIR``: a whole DeerFlow data folder migrated into our storage, one
document per (user, agent) it holds, with a receipt.

A folder is not a file: it holds every version DeerFlow has written (global and per-agent
``memory.json``, per-user v1.0 and v2.0 files, one Markdown file per fact), several users and
agents, and files that cannot be read. So the import reads the whole folder first
(:func:`~deermem_middleware.formats.deerflow_layout.read_folder`, leniently, each bad fact dropped
on its own), then merges each scope's pieces into its document in one compare-and-set write,
capped as extracted memory is. The receipt says, per scope, what was found, added, already known,
repaired and dropped, and from which files; a file that could not be read makes the exit status 1
without stopping the others. The merging and the receipt's lines are the file import's
(:mod:`~deermem_middleware.cli.interchange`), so a fact imported either way is treated the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deermem_middleware.formats.deerflow_layout import FolderRead
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.carry_over import ScopeImport

from deermem_middleware.cli.common import UsageError, _now, _opened, _storage_guard
from deermem_middleware.cli.receipts import _capped_note, _print_lines

__all__: list[str] = []  # private: the command is the interface


def _check_folder(root: Path) -> None:
    """A clear error when ``root`` is not a DeerFlow data folder (with the likely one)."""
    from deermem_middleware.formats.deerflow_layout import is_deerflow_folder

    if not root.exists():
        raise UsageError(f"--deerflow {root}: no such folder")
    if root.is_file():
        raise UsageError(
            f"--deerflow {root} is a file: give the DeerFlow data folder that holds it "
            f"(or import this one file: deermem import {root})"
        )
    if is_deerflow_folder(root):
        return
    likely = [p for p in (root / ".deer-flow", root / "backend" / ".deer-flow") if p.is_dir()]
    hint = f"; did you mean {likely[0]}?" if likely else ""
    raise UsageError(
        f"{root} is not a DeerFlow data folder: it holds no memory.json, agents/<name>/"
        f"memory.json, users/<uid>/memory.json or agents/<name>/facts/ Markdown files{hint}"
    )


def _import_folder(args: argparse.Namespace) -> int:
    from deermem_middleware.formats.deerflow_layout import read_folder

    root = Path(args.deerflow).expanduser()
    _check_folder(root)
    only = None if args.user is None else [(args.user, args.agent)]
    folder = read_folder(root, now=_now(), only=only, log=False)  # the receipt lists them
    scopes = [s for s in folder.scopes() if args.agent is None or s[1] == args.agent]
    if not scopes and not folder.errors:
        who = (
            " for"
            + (f" user {args.user!r}" if args.user else "")
            + (f" agent {args.agent!r}" if args.agent else "")
        )
        raise UsageError(f"{root}: no DeerFlow memory{who}")
    receipts: list[ScopeImport] = []
    with _opened(args) as middleware, _storage_guard(middleware):
        for user, agent in scopes:
            receipts.append(_import_scope(middleware, folder, user, agent, args.replace))
    _print_folder_receipt(root, folder, receipts, args.verbose)
    for relative, reason in folder.errors:
        print(f"deermem: error: {root / relative}: {reason}", file=sys.stderr)
    return 1 if folder.errors else 0


def _import_scope(
    middleware: MemoryService, folder: FolderRead, user: str, agent: str, replace: bool
) -> ScopeImport:
    from deermem_middleware.storage.carry_over import import_scope

    return import_scope(
        lambda scope, mutate: middleware.change(scope, mutate)[2],
        folder,
        middleware.scope(user, agent),
        replace=replace,
        max_facts=middleware.config.max_facts,
        clock=_now,
    )


def _print_folder_receipt(
    root: Path, folder: FolderRead, receipts: list[ScopeImport], verbose: int
) -> None:
    found = added = known = repaired = dropped = new_ids = 0
    print(f"imported the DeerFlow data folder {root}:")
    for r in receipts:
        merge = r.change.report
        found, added, repaired, dropped = (
            found + r.found,
            added + len(merge.added),
            repaired + r.repaired,
            dropped + r.dropped,
        )
        known += merge.same_id + merge.same_text
        new_ids += r.ids_repaired
        sections = f" ({', '.join(merge.sections)})" if merge.sections else ""
        print(
            f"  user {r.user!r}, agent {r.agent!r} (revision {r.revision}): "
            f"{r.found} fact(s) found, {len(merge.added)} added, {merge.same_id} with a "
            f"known id and {merge.same_text} with known text skipped, {r.repaired} repaired"
            + (f" ({r.ids_repaired} given a new id)" if r.ids_repaired else "")
            + f", {r.dropped} dropped; {len(merge.sections)} summary(ies) taken{sections}"
            + _capped_note(r.change.capped)
        )
        for piece in r.pieces:
            what = f"{len(piece.memory.facts)} fact(s)"
            if piece.summaries:
                what += f", {piece.summaries} summary(ies)"
                what += " (user-wide in DeerFlow)" if piece.user_wide else ""
            print(f"    from {piece.relative} ({piece.kind}: {what})")
    for relative, why in folder.skipped:
        print(f"  skipped {relative}: {why}")
    lines = [line for r in receipts for p in r.pieces for line in p.report.lines()]
    if lines:
        print("  repairs:")
        _print_lines(lines, verbose, indent="    ")
    left_out = [
        f"user {r.user!r}, agent {r.agent!r}: {f.id}: {f.content}"
        for r in receipts
        for f in r.change.left_out
    ]
    if left_out:
        print("  not kept (over max_facts; raise it and import again to keep them):")
        _print_lines(left_out, verbose, indent="    ")
    print(
        f"total: {found} fact(s) found in {len(receipts)} document(s): {added} added, "
        f"{known} already known, {repaired} repaired"
        + (f" ({new_ids} given a new id)" if new_ids else "")
        + f", {dropped} dropped"
        + (f"; {len(folder.errors)} file(s) could not be read" if folder.errors else "")
    )
