"""``deermem show``, ``facts search`` and ``explain``: what the memory holds, and why a fact would
be injected."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Memory
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope

from deermem_middleware.cli.common import (
    _clip,
    _dump,
    _opened,
    _storage_guard,
    _table,
    _who,
)

__all__: list[str] = []  # private: the command is the interface


def _deerflow_root(middleware: MemoryService) -> Path | None:
    """The storage root when it is a DeerFlow data folder (JSON-file storage only)."""
    from deermem_middleware.formats.deerflow_layout import is_deerflow_folder

    root = middleware.files_root()
    return root if root is not None and is_deerflow_folder(root) else None


def _deerflow_scope(root: Path, scope: MemoryScope) -> tuple[Memory, list[str]]:
    """What DeerFlow's files under ``root`` hold for ``scope`` (read-only), and those files."""
    from deermem_middleware.cli.common import _now
    from deermem_middleware.formats.deerflow_layout import read_folder
    from deermem_middleware.formats.importing import merge_pieces

    folder = read_folder(root, only=[(scope.user_id, scope.agent_name)], log=False)
    pieces = folder.for_scope(scope.user_id, scope.agent_name)
    return merge_pieces(pieces, _now()), [p.relative for p in pieces]


def _show(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.document import SECTION_FIELDS

    with _opened(args) as middleware, _storage_guard(middleware):
        scope = middleware.scope(args.user)
        stored = middleware.load(scope)
        where = middleware.describe(scope)
        deerflow = _deerflow_root(middleware)
        from_deerflow: list[str] = []
        if deerflow is not None:
            memory_there, from_deerflow = _deerflow_scope(deerflow, scope)
            if stored.revision == 0 and from_deerflow:
                from deermem_middleware.storage.base import StoredMemory

                stored = StoredMemory(memory_there, 0)
                where = f"DeerFlow's files in {deerflow} (read only): {', '.join(from_deerflow)}"
            elif from_deerflow:
                print(
                    f"deermem: note: {deerflow} also holds DeerFlow memory for {_who(scope)} "
                    f"({', '.join(from_deerflow)}), not shown: `deermem import --deerflow "
                    f"{deerflow}` merges it",
                    file=sys.stderr,
                )
                from_deerflow = []
    memory = stored.memory
    shown = [f for f in memory.facts if args.all or f.status == "active"]
    hidden = len(memory.facts) - len(shown)
    hidden_note = f"{hidden} superseded/archived fact(s) hidden; --all shows them" if hidden else ""
    if from_deerflow:
        print(
            f"deermem: note: not imported yet; `deermem import --deerflow {deerflow}` takes "
            "DeerFlow's memory into this storage",
            file=sys.stderr,
        )
    if args.json:
        document = {"revision": stored.revision, **memory.to_json_dict()}
        if from_deerflow:
            document["deerflowFiles"] = from_deerflow
        if hidden:
            keep = {f.id for f in shown}
            document["facts"] = [f for f in document["facts"] if f["id"] in keep]
            print(f"deermem: {hidden_note}", file=sys.stderr)
        print(_dump(document))
        return 0
    print(f"memory of {_who(scope)}: {where}")
    print(f"revision {stored.revision}, last updated {memory.lastUpdated or 'never'}")
    profile = [(n, memory.section(n).summary) for n in SECTION_FIELDS if memory.section(n).summary]
    if profile:
        print("profile:")
        for name, summary in profile:
            print(f"  {name}: {summary}")
    print(f"facts ({len(shown)}{' shown; ' + hidden_note if hidden else ''}):")
    if shown:
        from deermem_middleware.injection.render import fact_date_label

        headers = ["id", *(["status"] if args.all else []), "category", "conf", "date", "content"]
        rows = [
            [
                f.id,
                *([f.status] if args.all else []),
                f.category,
                f"{f.confidence:.2f}",
                (fact_date_label(f) or "-") + (f" (until {f.validUntil})" if f.validUntil else ""),
                f.content + (" (manual)" if f.manual else ""),
            ]
            for f in sorted(shown, key=lambda f: (f.status != "active", -f.confidence))
        ]
        for line in _table(headers, rows):
            print(line)
    return 0


def _search(args: argparse.Namespace) -> int:
    from langchain_core.messages import HumanMessage

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        total = sum(1 for f in middleware.load(scope).memory.facts if f.status == "active")
        ranked = middleware.select_facts(
            [HumanMessage(args.query)],
            user_id=scope.user_id,
            agent_name=scope.agent_name,
            top_k=args.limit,
        )
    if args.json:
        print(
            _dump(
                [
                    {
                        "rank": i,
                        "id": s.fact.id,
                        "score": s.score,
                        "relevance": s.relevance,
                        "lexical": s.lexical,
                        "semantic": s.semantic,
                        "category": s.fact.category,
                        "confidence": s.fact.confidence,
                        "content": s.fact.content,
                    }
                    for i, s in enumerate(ranked, 1)
                ]
            )
        )
        return 0
    print(f"facts of {_who(scope)} ranked for {args.query!r}: {len(ranked)} of {total} active")
    if ranked:
        rows = [
            [
                str(i),
                s.fact.id,
                f"{s.score:.3f}",
                s.fact.category,
                f"{s.fact.confidence:.2f}",
                s.fact.content,
            ]
            for i, s in enumerate(ranked, 1)
        ]
        for line in _table(["#", "id", "score", "category", "conf", "content"], rows):
            print(line)
    return 0


def _routes(routes: dict[str, float]) -> str:
    """The routes that found a fact, short ("lex+sem+ent"); "-" when only the sum did."""
    from deermem_middleware.retrieval.routes import ROUTE_ABBREVIATIONS

    return "+".join(ROUTE_ABBREVIATIONS.get(name, name) for name in routes) or "-"


def _explain(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        middleware.warm_up(scope.user_id, scope.agent_name)
        injected = bool(
            getattr(args, "memory_enabled", True) and middleware.config.injection_enabled
        )
        report = middleware.explain_report(scope, args.message, injection_enabled=injected)
    if args.json:
        print(_dump(report))
        return 0
    rows: list[dict[str, Any]] = report["facts"]
    guaranteed = sum(1 for r in rows if r["guaranteed"])
    relevance = report["relevance"]
    time_route = report["timeRoute"] or ""
    print(f"{_who(scope)}")
    print(f"message: {args.message!r}")
    print(report["formula"].removesuffix(f"; {relevance}"))
    print(relevance)
    if time_route:
        print(f"time = {time_route}")
    entity_route = report.get("entityRoute")
    if entity_route:
        print(
            "entity = the share of the message's entities a fact names: "
            + ", ".join(entity_route["entities"])
        )
    for rule in report.get("recallRules", []):
        state = "applies" if rule["applies"] else "does not apply"
        print(f"rule {rule['rule']} ({state})")
    print(
        "confidence = the stored confidence decayed by the fact's category half-life since it "
        "was last used, confirmed or injected (the conf column shows the value used)"
    )
    print(
        f"{len(rows) - guaranteed} of {report['activeFacts']} active fact(s) ranked "
        f"(top_k {report['topK']})" + (f", {guaranteed} guaranteed" if guaranteed else "") + ":"
    )
    if rows:
        semantic = any(r["semantic"] is not None for r in rows)
        recency_on = any(r["recency"] is not None for r in rows)
        time_on = bool(time_route)

        def number(value: float | None, digits: int = 3) -> str:
            return "-" if value is None else f"{value:.{digits}f}"

        headers = [
            "#",
            "id",
            "relevance",
            "lexical",
            *(["semantic"] if semantic else []),
            "conf",
            *(["recency"] if recency_on else []),
            *(["time"] if time_on else []),
            "score",
            "routes",
            "tokens",
            "in block",
            "content",
        ]
        table = [
            [
                "g" if r["guaranteed"] else str(i),
                r["id"],
                number(r["relevance"]),
                number(r["lexical"]),
                *([number(r["semantic"])] if semantic else []),
                number(r["confidence"] if r["confidenceUsed"] is None else r["confidenceUsed"], 2),
                *([number(r["recency"], 2)] if recency_on else []),
                *([number(r["time"], 2)] if time_on else []),
                number(r["score"]),
                _routes(r["routes"]),
                str(r["tokens"]),
                ("yes" if r["inBlock"] else "no") + (" (guaranteed)" if r["guaranteed"] else ""),
                _clip(r["content"], 48),
            ]
            for i, r in enumerate(rows, 1 - guaranteed)
        ]
        for line in _table(headers, table):
            print(line)
        for r in rows:
            if r["placedAfter"]:
                print(f"{r['id']} placed after {r['placedAfter']}: a newer statement of the same")
            if r.get("overruledBy"):
                print(f"{r['id']} {r['reason']}")
    shown = sum(1 for r in rows if r["inBlock"])
    print(
        f"block: {report['blockTokens']} tokens (estimated, {report['tokenCounting']} counting, "
        f"as budgeted) of max_injection_tokens {report['maxInjectionTokens']}; {shown} fact(s) "
        "in it"
    )
    if not report["injectionEnabled"]:
        print("note: memory or injection is disabled for this agent: nothing is injected")
    print(report["block"] or "(empty: nothing would be injected)")
    return 0
