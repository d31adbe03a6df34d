"""The console's REST API: a FastAPI router over the memory engine, mountable into any FastAPI
app (or a LangGraph server's custom routes), with an OpenAPI schema.

Routes (all under the prefix it is mounted at; every one needs a credential, see
:mod:`~deermem_middleware.console.auth`):

========================  ==========================================================  ======
``GET  api/session``      who is calling, their role and scope, the CSRF token         read
``GET  api/users``        users (paged, ``q`` searches ids), with their agents         read
``GET  api/agents``       agents, with how many users each has                         read
``GET  api/memory``       a user's profile (six summaries), revision and counts        read
``GET  api/facts``        a user's facts: status/category/text filters, sort, pages    read
``GET  api/search``       facts ranked for a query, as injection ranks them            read
``POST api/explain``      what would be injected for a message, and why (each fact)    read
``POST api/facts``        add a manual fact                                            edit
``PATCH api/facts/{id}``  edit a fact (``version`` required: a 409 if it changed)      edit
``DELETE api/facts/{id}`` delete a fact (``version`` required)                         edit
``POST api/forget``       forget a user (or one agent of theirs), with a receipt       edit
``POST api/import``       merge (or replace with) a document, ours or DeerFlow's       edit
``GET  api/export``       a user's document, ours or DeerFlow's ``memory.json``        read
``GET  api/stats``        per user and agent: facts by status, sizes, injections       read
``GET  api/ledger``       the recent injections of this process                        read
``GET  api/audit``        the audit log of human changes                               read
``GET  api/openapi.json`` this API's OpenAPI schema                                    read
========================  ==========================================================  ======

User and agent are query parameters (or body fields), never path segments: ids come from
hosts and may hold ``/``, ``%`` or be 10 kB long. Every change goes through
:meth:`MemoryService.change` (compare-and-set, marked manual, caches dropped) and writes an
:class:`~deermem_middleware.console.audit.AuditEntry`.
"""

import json
import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from deermem_middleware.console.audit import AuditEntry
from deermem_middleware.console.errors import ApiError, error_response, json_error
from deermem_middleware.console.state import Caller, Console, read_body
from deermem_middleware.console.views import (
    STATUSES,
    counts,
    fact_version,
    fact_view,
    filter_facts,
    page,
    paged,
    profile_view,
    sort_facts,
)
from deermem_middleware.memory.document import (
    MAX_FACT_CHARS,
    Fact,
    Memory,
    new_fact_id,
    utc_now_iso,
)
from deermem_middleware.memory.manual import add_fact, edit_fact, find_fact, remove_fact
from deermem_middleware.storage.base import RESERVED_USER, MemoryScope

__all__ = ["console_router"]

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 8_000
Status = Literal["all", "active", "superseded", "archived"]
Sort = Literal["updated", "created", "confidence", "injections", "confirmations"]
Limit = Annotated[int, Query(ge=1, le=500, description="page size")]
Offset = Annotated[int, Query(ge=0, le=10**9)]
UserQ = Annotated[str, Query(min_length=1, max_length=20_000, description="user id")]
AgentQ = Annotated[str | None, Query(max_length=2_000, description="agent (default: engine's)")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    user: str = Field(min_length=1, max_length=20_000)
    agent: str | None = Field(default=None, max_length=2_000)


class FactCreate(_Body):
    content: str = Field(min_length=1, max_length=MAX_FACT_CHARS * 4)
    category: str | None = Field(default=None, max_length=200)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    eventAt: str | None = Field(default=None, max_length=64)
    validUntil: str | None = Field(default=None, max_length=64)


class FactEdit(_Body):
    version: str = Field(min_length=1, max_length=64, description="the fact's version as loaded")
    content: str | None = Field(default=None, min_length=1, max_length=MAX_FACT_CHARS * 4)
    category: str | None = Field(default=None, max_length=200)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    eventAt: str | None = Field(default=None, max_length=64)
    validUntil: str | None = Field(default=None, max_length=64)


class ExplainRequest(_Body):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class ForgetRequest(_Body):
    confirm: str = Field(description="the user id again, typed by the person forgetting")


class ImportRequest(_Body):
    document: dict[str, Any]
    format: Literal["auto", "deermem", "deerflow"] = "auto"
    replace: bool = False


def _as_stored(fact: Fact) -> dict[str, Any]:
    """A fact as its document stores it (for the audit log's before and after)."""
    return fact.model_dump(mode="json", by_alias=True, exclude_none=True)


def _route_class(console: Console) -> type[APIRoute]:
    """Routes that refuse bodies over the limit (413) and answer every known error as JSON
    (see :mod:`~deermem_middleware.console.errors`), mounted anywhere."""
    limit = console.max_body_bytes

    class ConsoleRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                declared = request.headers.get("content-length")
                too_big = json_error(
                    413, f"the request body is larger than {limit:,} bytes", "body"
                )
                if declared is not None:
                    if not declared.isdigit():
                        return json_error(400, "Content-Length is not a number", "body")
                    if int(declared) > limit:
                        return too_big
                body = await read_body(request, limit)
                if body is None:
                    return too_big
                request._body = body  # FastAPI reads the body from here
                try:
                    return await handler(request)
                except Exception as exc:
                    answer = error_response(exc)
                    if answer is None:
                        raise
                    return answer

            return guarded

    return ConsoleRoute


def console_router(console: Console) -> APIRouter:
    """The API routes of ``console`` (see the module docstring), for ``app.include_router``."""
    router = APIRouter(route_class=_route_class(console), tags=["memory console"])
    service = console.service

    def caller(request: Request) -> Caller:
        return console.check(request)

    Who = Annotated[Caller, Depends(caller)]

    def stored(scope: MemoryScope) -> tuple[Memory, int]:
        loaded = service.storage.load(scope)
        if loaded.revision == 0 and not loaded.memory.facts:
            raise ApiError(
                404,
                f"no memory for user {scope.user_id!r}, agent {scope.agent_name!r} "
                "(see api/users; an import creates one)",
                "user",
            )
        return loaded.memory, loaded.revision

    def view(fact: Fact) -> dict[str, Any]:
        return fact_view(fact, console.clock(), service.config.fact_half_life_days or None)

    def now() -> str:
        return utc_now_iso(console.clock())

    def audit(
        who: Caller, action: str, scope: MemoryScope, *, all_agents: bool = False, **fields: Any
    ) -> None:
        """Log a change to ``scope`` (to every agent of its user with ``all_agents``)."""
        console.audit.record(
            AuditEntry(
                at=now(),
                operator=who.operator.name,
                role=who.operator.role,
                action=action,
                user=scope.user_id,
                agent=None if all_agents else scope.agent_name,
                **fields,
            )
        )

    def scopes_of(who: Caller) -> list[MemoryScope]:
        return sorted(
            s
            for s in service.storage.list_scopes()
            if s.user_id != RESERVED_USER and who.operator.can_see(s.user_id)
        )

    # -- who ------------------------------------------------------------------------------

    @router.get("/api/session", summary="Who is calling")
    def session(who: Who) -> dict[str, Any]:
        return {
            **who.operator.describe(),
            "csrf": who.session.csrf if who.session is not None else None,
            "agent": service.agent_name,
        }

    @router.get("/api/openapi.json", include_in_schema=False)
    def openapi(who: Who, request: Request) -> dict[str, Any]:
        return request.app.openapi()

    # -- listing --------------------------------------------------------------------------

    @router.get("/api/users", summary="Users, paged and searchable")
    def users(
        who: Who, q: str | None = None, offset: Offset = 0, limit: Limit = 50
    ) -> dict[str, Any]:
        agents: dict[str, list[str]] = {}
        for scope in scopes_of(who):
            agents.setdefault(scope.user_id, []).append(scope.agent_name)
        ids = [u for u in agents if not q or q.casefold() in u.casefold()]
        return paged("users", ids, offset, limit, lambda u: {"user": u, "agents": agents[u]})

    @router.get("/api/agents", summary="Agents, with their user counts")
    def agents(
        who: Who, q: str | None = None, offset: Offset = 0, limit: Limit = 50
    ) -> dict[str, Any]:
        users_of: dict[str, int] = {}
        for scope in scopes_of(who):
            users_of[scope.agent_name] = users_of.get(scope.agent_name, 0) + 1
        names = sorted(a for a in users_of if not q or q.casefold() in a.casefold())
        return paged("agents", names, offset, limit, lambda a: {"agent": a, "users": users_of[a]})

    # -- one user's memory ----------------------------------------------------------------

    @router.get("/api/memory", summary="A user's profile, revision and counts")
    def memory(who: Who, user: UserQ, agent: AgentQ = None) -> dict[str, Any]:
        scope = console.scope(who, user, agent)
        doc, revision = stored(scope)
        return {
            "user": scope.user_id,
            "agent": scope.agent_name,
            "revision": revision,
            "lastUpdated": doc.lastUpdated,
            "profile": profile_view(doc),
            "counts": counts(doc),
            "droppedFacts": len((doc.model_extra or {}).get("droppedFacts") or []),
        }

    @router.get("/api/facts", summary="A user's facts, filtered, sorted and paged")
    def facts(
        who: Who,
        user: UserQ,
        agent: AgentQ = None,
        status: Status = "all",
        category: Annotated[str | None, Query(max_length=200)] = None,
        q: Annotated[str | None, Query(max_length=2_000)] = None,
        sort: Sort = "updated",
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        scope = console.scope(who, user, agent)
        doc, revision = stored(scope)
        found = sort_facts(filter_facts(doc.facts, status=status, category=category, text=q), sort)
        return {
            "user": scope.user_id,
            "agent": scope.agent_name,
            "revision": revision,
            "total": len(found),
            "offset": offset,
            "limit": limit,
            "categories": sorted({f.category for f in doc.facts}),
            "statuses": list(STATUSES),
            "facts": [view(f) for f in page(found, offset, limit)],
        }

    @router.get("/api/search", summary="Facts ranked for a query, as injection ranks them")
    def search(
        who: Who,
        user: UserQ,
        q: Annotated[str, Query(min_length=1, max_length=MAX_MESSAGE_CHARS)],
        agent: AgentQ = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 15,
    ) -> dict[str, Any]:
        from langchain_core.messages import HumanMessage

        scope = console.scope(who, user, agent)
        stored(scope)
        ranked = service.select_facts(
            [HumanMessage(q)], user_id=scope.user_id, agent_name=scope.agent_name, top_k=limit
        )
        return {
            "user": scope.user_id,
            "agent": scope.agent_name,
            "query": q,
            "results": [
                {
                    "rank": rank,
                    "score": s.score,
                    "relevance": s.relevance,
                    "lexical": s.lexical,
                    "semantic": s.semantic,
                    "fact": view(s.fact),
                }
                for rank, s in enumerate(ranked, 1)
            ],
        }

    @router.post("/api/explain", summary="What would be injected for a message, and why")
    def explain(who: Who, body: ExplainRequest) -> dict[str, Any]:
        from deermem_middleware.injection.explain import explain_report

        scope = console.scope(who, body.user, body.agent)
        stored(scope)
        service.warm_up(scope.user_id, scope.agent_name)
        return explain_report(service, scope, body.message)

    # -- changes --------------------------------------------------------------------------

    def checked_version(doc: Memory, fact_id: str, version: str) -> Fact:
        fact = find_fact(doc, fact_id)
        if fact_version(fact) != version:
            raise ApiError(
                409,
                "this fact was changed since you loaded it (by an agent's update or another "
                "person); nothing was saved: review the current text and make your change again",
                "version",
                current=view(fact),
            )
        return fact

    @router.post("/api/facts", status_code=201, summary="Add a manual fact")
    def add(who: Who, body: FactCreate) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        console.editor(who)
        stored(scope)
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
                now=now(),
                event_at=body.eventAt,
                valid_until=body.validUntil,
                **extra,
            ),
        )
        fact = find_fact(after, fact_id)
        audit(who, "fact.add", scope, fact_id=fact_id, after=_as_stored(fact))
        return {"revision": revision, "fact": view(fact)}

    @router.patch("/api/facts/{fact_id:path}", summary="Edit a fact (compare-and-set)")
    def edit(who: Who, fact_id: str, body: FactEdit) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        console.editor(who)
        stored(scope)
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
            checked_version(doc, fact_id, body.version)
            return edit_fact(doc, fact_id, now=now(), **fields)  # type: ignore[arg-type]

        before, after, revision = service.change(scope, change)
        old, new = find_fact(before, fact_id), find_fact(after, fact_id)
        audit(
            who,
            "fact.edit",
            scope,
            fact_id=fact_id,
            before=_as_stored(old),
            after=_as_stored(new),
        )
        return {"revision": revision, "fact": view(new)}

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
        stored(scope)

        def change(doc: Memory) -> Memory:
            checked_version(doc, fact_id, version)
            return remove_fact(doc, fact_id, now=now())

        before, _, revision = service.change(scope, change)
        old = find_fact(before, fact_id)
        audit(who, "fact.delete", scope, fact_id=fact_id, before=_as_stored(old))
        return {"revision": revision, "removed": view(old)}

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
            for s in service.storage.list_scopes()
            if s.user_id == scope.user_id and (agent is None or s.agent_name == agent)
        ]
        pending = service.journal is not None and any(
            e.scope.user_id == scope.user_id and (agent is None or e.scope.agent_name == agent)
            for e in service.journal.entries()
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
        audit(who, "forget", scope, all_agents=agent is None, detail="; ".join(lines))
        return {"user": scope.user_id, "agent": agent, "receipt": lines}

    # -- interchange ----------------------------------------------------------------------

    @router.get("/api/export", summary="A user's memory document")
    def export(
        who: Who,
        user: UserQ,
        agent: AgentQ = None,
        format: Literal["deermem", "deerflow"] = "deermem",
    ) -> dict[str, Any]:
        scope = console.scope(who, user, agent)
        doc, _ = stored(scope)
        if format == "deerflow":
            from deermem_middleware.formats.deerflow import to_deerflow

            return to_deerflow(doc)
        return doc.to_json_dict()

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
            read = read_document_data(body.document, fmt=body.format, where="document", now=now())
        except ImportFormatError as exc:
            where = f"document.{exc.field}" if exc.field else "document"
            raise ApiError(400, f"{where}: {exc}", where) from None
        change = ImportChange(
            read.memory, replace=body.replace, max_facts=service.config.max_facts, clock=now
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
            "dropped": read.report.facts_dropped,
            "capped": change.capped.notes(),
            "overCapacity": left_out,
            "replaced": len(before.facts) if body.replace else None,
        }
        audit(
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

    # -- the whole memory -----------------------------------------------------------------

    @router.get("/api/stats", summary="Per user and agent: facts, sizes, injections")
    def stats(who: Who, user: str | None = None) -> dict[str, Any]:
        from deermem_middleware.runtime.stats import stats_items

        items = stats_items(
            service.storage, service.journal, user=user, visible=who.operator.can_see
        )
        return {
            "users": len({i["user"] for i in items}),
            "documents": len(items),
            "facts": sum(i.get("facts", 0) for i in items),
            "injections": sum(i.get("injections", 0) for i in items),
            "scopes": items,
        }

    @router.get("/api/ledger", summary="The recent injections of this process")
    def ledger(
        who: Who, user: str | None = None, limit: Annotated[int, Query(ge=1, le=256)] = 50
    ) -> dict[str, Any]:
        records = [
            r
            for r in reversed(service.ledger)
            if who.operator.can_see(r.user_id) and (user is None or r.user_id == user)
        ][:limit]
        return {
            "records": [
                {
                    "at": r.at,
                    "user": r.user_id,
                    "agent": r.agent_name,
                    "thread": r.thread_id,
                    "tokens": r.tokens,
                    "facts": [
                        {
                            "id": f.fact_id,
                            "content": f.content,
                            "score": f.score,
                            "relevance": f.relevance,
                            "confidence": f.confidence,
                            "guaranteed": f.guaranteed,
                            "routes": dict(f.routes),
                        }
                        for f in r.facts
                    ],
                }
                for r in records
            ]
        }

    @router.get("/api/audit", summary="The audit log of human changes, newest first")
    def audit_log(
        who: Who,
        user: str | None = None,
        agent: str | None = None,
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        if user is not None:
            console.scope(who, user, agent)
        entries = console.audit.entries(user=user, agent=agent, visible=who.operator.can_see)
        return paged("entries", entries, offset, limit, AuditEntry.to_json)

    return router
