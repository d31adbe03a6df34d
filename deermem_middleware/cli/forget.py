"""``deermem forget``: erase a user (documents, pending captures, quarantined copies, locks, keys)
or one fact, with a receipt."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from deermem_middleware.cli.common import (
    EXIT_DECLINED,
    UsageError,
    _find_fact,
    _opened,
    _who,
)
from deermem_middleware.cli.facts import _remove_fact

if TYPE_CHECKING:
    from deermem_middleware.storage.base import MemoryScope

__all__: list[str] = []  # private: the command is the interface


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _forget(args: argparse.Namespace) -> int:
    if args.fact is not None:
        return _forget_fact(args)
    if args.user is None:
        raise UsageError("forget: name what to erase: --user U [--agent A], or --fact ID")

    def confirm(scopes: list[MemoryScope]) -> bool:
        if args.yes:
            return True
        agents = ", ".join(s.agent_name for s in scopes) or "none stored"
        what = f"agent {args.agent!r}" if args.agent else f"every agent ({agents})"
        return _confirm(
            f"Erase the memory of user {args.user!r} for {what}: documents, pending "
            "captures and leftover files? This cannot be undone."
        )

    with _opened(args) as middleware:
        agent = middleware.agent_name if args.agent is not None else None
        receipt = middleware.forget_user(args.user, agent, confirm)
        where = middleware.location()
    if receipt is None:
        print("nothing deleted", file=sys.stderr)
        return EXIT_DECLINED
    scope_text = f"agent {args.agent!r}" if args.agent else "all agents"
    print(f"forgot user {args.user!r} ({scope_text}) in {where}:")
    for line in receipt.lines or ["nothing was stored for this user"]:
        print(f"  {line}")
    print(
        f"total: {receipt.documents} document(s), {receipt.facts} fact(s), {receipt.pending} "
        f"pending capture(s), {receipt.files} other file(s), {receipt.keys} other key(s)"
    )
    return 0


def _forget_fact(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user or "default")
        fact = _find_fact(middleware.load(scope).memory, args.fact, scope)
        if not args.yes and not _confirm(
            f"Erase fact {fact.id} ({fact.content!r}) from the memory of {_who(scope)}?"
        ):
            print("nothing deleted", file=sys.stderr)
            return EXIT_DECLINED
        removed, revision = _remove_fact(middleware, scope, args.fact)
        where = middleware.describe(scope)
    print(f"forgot fact {removed.id} of {_who(scope)}:")
    print(f"  deleted from {where} (now revision {revision}): {removed.content}")
    print("  embedding cache and selection index of this document dropped")
    return 0
