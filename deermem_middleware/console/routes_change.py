"""The console's changing routes: add, edit and delete a fact, forget a user, import a document
(see :mod:`~deermem_middleware.console.api` for the table). Every change goes through
:meth:`MemoryService.change` and writes an audit entry."""

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from deermem_middleware.console.errors import ApiError
from deermem_middleware.console.routing import (
    AgentQ,
    FactCreate,
    FactEdit,
    ForgetRequest,
    ImportRequest,
    Routes,
    UserQ,
    as_stored,
)
from deermem_middleware.console.state import Caller
from deermem_middleware.memory.document import Memory, new_fact_id
from deermem_middleware.memory.manual import add_fact, edit_fact, find_fact, remove_fact

__all__ = ["add_changing_routes", "add_import_route"]


def add_changing_routes(router: APIRouter, routes: Routes) -> None:
    """Add, edit and delete a fact; forget a user."""
    service = routes.service
    console = routes.console
    Who = Annotated[Caller, Depends(routes.caller)]

    @router.post("/api/facts", status_code=201, summary="Add a manual fact")
    def add(who: Who, body: FactCreate) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        console.editor(who)
        routes.stored(scope)
        fact_id = new_fact_id()
        extra: dict[str, Any] = {}
        if body.category is not None:
            extra["category"] = body.category
        # what the person types is what the user said: as `deermem fact add`, 1.0 by default
        extra["confidence"] = 1.0 if body.confidence is None else body.confidence
        _, after, revision = service.change(
            scope,
            lambda m: add_fact(
                m,
                body.content,
                fact_id=fact_id,
                now=routes.now(),
                event_at=body.eventAt,
                valid_until=body.validUntil,
                **extra,
            ),
        )
        fact = find_fact(after, fact_id)
        routes.audit(who, "fact.add", scope, fact_id=fact_id, after=as_stored(fact))
        return {"revision": revision, "fact": routes.view(fact)}

    @router.patch("/api/facts/{fact_id:path}", summary="Edit a fact (compare-and-set)")
    def edit(who: Who, fact_id: str, body: FactEdit) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        console.editor(who)
        routes.stored(scope)
        fields = {
            "content": body.content,
            "category": body.category,
            "confidence": body.confidence,
            "event_at": body.eventAt,
            "valid_until": body.validUntil,
        }
        if all(v is None for v in fields.values()):
            raise ApiError(
                400, "nothing to change: give content, category, confidence, eventAt or validUntil"
            )

        def change(doc: Memory) -> Memory:
            routes.checked_version(doc, fact_id, body.version)
            return edit_fact(doc, fact_id, now=routes.now(), **fields)  # type: ignore[arg-type]

        before, after, revision = service.change(scope, change)
        old, new = find_fact(before, fact_id), find_fact(after, fact_id)
        routes.audit(
            who,
            "fact.edit",
            scope,
            fact_id=fact_id,
            before=as_stored(old),
            after=as_stored(new),
        )
        return {"revision": revision, "fact": routes.view(new)}

    @router.delete("/api/facts/{fact_id:path}", summary="Delete a fact (compare-and-set)")
    def delete(
        who: Who,
        fact_id: str,
        user: UserQ,
        version: Annotated[str, Query(min_length=1, max_length=64)],
        agent: AgentQ = None,
    ) -> dict[str, Any]:
        scope = console.scope(who, user, agent)
        console.editor(who)
        routes.stored(scope)

        def change(doc: Memory) -> Memory:
            routes.checked_version(doc, fact_id, version)
            return remove_fact(doc, fact_id, now=routes.now())

        before, _, revision = service.change(scope, change)
        old = find_fact(before, fact_id)
        routes.audit(who, "fact.delete", scope, fact_id=fact_id, before=as_stored(old))
        return {"revision": revision, "removed": routes.view(old)}

    @router.post("/api/forget", summary="Forget a user (or one agent of theirs)")
    def forget(who: Who, body: ForgetRequest) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        console.editor(who)
        if body.confirm != body.user:
            raise ApiError(
                400,
                "confirm: type the user id exactly to confirm forgetting them",
                "confirm",
            )
        agent = scope.agent_name if body.agent else None
        known = [
            s
            for s in service.list_scopes()
            if s.user_id == scope.user_id and (agent is None or s.agent_name == agent)
        ]
        pending = any(
            e.scope.user_id == scope.user_id and (agent is None or e.scope.agent_name == agent)
            for e in service.pending_entries()
        )
        if not known and not pending:
            raise ApiError(
                404,
                f"no memory for user {scope.user_id!r}" + (f", agent {agent!r}" if agent else ""),
                "user",
            )
        receipt = service.forget_user(scope.user_id, agent)
        lines = receipt.lines if receipt is not None else []
        redacted = console.audit.forget(scope.user_id, agent)
        if redacted:
            lines = [*lines, f"audit log: removed the texts of {redacted} entry(ies)"]
        routes.audit(who, "forget", scope, all_agents=agent is None, detail="; ".join(lines))
        return {"user": scope.user_id, "agent": agent, "receipt": lines}


MAX_RECEIPT_LINES = 200
"""Repair lines an import's answer lists (then one line with how many more)."""


def _receipt_lines(lines: list[str]) -> list[str]:
    """What the lenient read repaired or dropped, one line per fact and field, bounded."""
    if len(lines) <= MAX_RECEIPT_LINES:
        return lines
    return [*lines[:MAX_RECEIPT_LINES], f"... and {len(lines) - MAX_RECEIPT_LINES} more"]


def add_import_route(router: APIRouter, routes: Routes) -> None:
    """Merge a document into a user's memory (or replace it)."""
    service = routes.service
    console = routes.console
    Who = Annotated[Caller, Depends(routes.caller)]

    @router.post("/api/import", summary="Merge a document into a user's memory (or replace it)")
    def import_(who: Who, body: ImportRequest) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        console.editor(who)
        from deermem_middleware.formats.importing import (
            ImportChange,
            ImportFormatError,
            log_import_cuts,
            read_document_data,
        )

        try:
            read = read_document_data(
                body.document, fmt=body.format, where="document", now=routes.now()
            )
        except ImportFormatError as exc:
            where = f"document.{exc.field}" if exc.field else "document"
            raise ApiError(400, f"{where}: {exc}", where) from None
        change = ImportChange(
            read.memory, replace=body.replace, max_facts=service.config.max_facts, clock=routes.now
        )

        def encodable(memory: Memory) -> Memory:
            result = change(memory)
            try:  # a lone surrogate where nothing repairs it (an unknown key): no storage takes it
                json.dumps(result.to_json_dict(), ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise ApiError(
                    400,
                    "document: holds text that is not valid Unicode (a lone surrogate)",
                    "document",
                ) from None
            return result

        before, _, revision = service.change(scope, encodable)
        log_import_cuts(change.capped, user=scope.user_id, agent=scope.agent_name)
        report, left_out = change.report, change.capped.facts_over_capacity
        result = {
            "revision": revision,
            "format": read.detected,
            "added": len(report.added),
            "sameId": report.same_id,
            "sameText": report.same_text,
            "sections": report.sections,
            "repaired": read.report.facts_repaired,
            "idsRepaired": read.report.ids_repaired,
            "dropped": read.report.facts_dropped,
            "repairs": _receipt_lines(read.report.lines()),
            "capped": change.capped.notes(),
            "overCapacity": left_out,
            "replaced": len(before.facts) if body.replace else None,
        }
        routes.audit(
            who,
            "import",
            scope,
            detail=(
                f"{'replaced' if body.replace else 'merged'} ({read.detected}): "
                f"{len(report.added)} fact(s) added"
                + (f", {len(left_out)} left out over max_facts" if left_out else "")
            ),
            after={"added": report.added[:200]},
        )
        return result
