"""The console's reading routes: who is calling, users and agents, one user's memory, search,
explain, export, and the whole memory's numbers, ledger and audit log (see
:mod:`~deermem_middleware.console.api` for the table)."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from deermem_middleware.console.audit import AuditEntry
from deermem_middleware.console.routing import (
    MAX_MESSAGE_CHARS,
    AgentQ,
    ExplainRequest,
    Limit,
    Offset,
    Routes,
    Sort,
    Status,
    UserQ,
)
from deermem_middleware.console.state import Caller
from deermem_middleware.console.views import (
    STATUSES,
    counts,
    filter_facts,
    page,
    paged,
    profile_view,
    sort_facts,
)

__all__ = ["add_reading_routes", "add_whole_memory_routes"]


def add_reading_routes(router: APIRouter, routes: Routes) -> None:
    """Who, listing, one user's memory, search and explain."""
    service = routes.service
    console = routes.console
    Who = Annotated[Caller, Depends(routes.caller)]

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
        for scope in routes.scopes_of(who):
            agents.setdefault(scope.user_id, []).append(scope.agent_name)
        ids = [u for u in agents if not q or q.casefold() in u.casefold()]
        return paged("users", ids, offset, limit, lambda u: {"user": u, "agents": agents[u]})

    @router.get("/api/agents", summary="Agents, with their user counts")
    def agents(
        who: Who, q: str | None = None, offset: Offset = 0, limit: Limit = 50
    ) -> dict[str, Any]:
        users_of: dict[str, int] = {}
        for scope in routes.scopes_of(who):
            users_of[scope.agent_name] = users_of.get(scope.agent_name, 0) + 1
        names = sorted(a for a in users_of if not q or q.casefold() in a.casefold())
        return paged("agents", names, offset, limit, lambda a: {"agent": a, "users": users_of[a]})

    # -- one user's memory ----------------------------------------------------------------

    @router.get("/api/memory", summary="A user's profile, revision and counts")
    def memory(who: Who, user: UserQ, agent: AgentQ = None) -> dict[str, Any]:
        scope = console.scope(who, user, agent)
        doc, revision = routes.stored(scope)
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
        doc, revision = routes.stored(scope)
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
            "facts": [routes.view(f) for f in page(found, offset, limit)],
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
        routes.stored(scope)
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
                    "fact": routes.view(s.fact),
                }
                for rank, s in enumerate(ranked, 1)
            ],
        }

    @router.post("/api/explain", summary="What would be injected for a message, and why")
    def explain(who: Who, body: ExplainRequest) -> dict[str, Any]:
        scope = console.scope(who, body.user, body.agent)
        routes.stored(scope)
        service.warm_up(scope.user_id, scope.agent_name)
        return service.explain_report(scope, body.message)


def add_export_route(router: APIRouter, routes: Routes) -> None:
    """A user's document, ours or DeerFlow's."""
    console = routes.console
    Who = Annotated[Caller, Depends(routes.caller)]

    @router.get("/api/export", summary="A user's memory document")
    def export(
        who: Who,
        user: UserQ,
        agent: AgentQ = None,
        format: Literal["deermem", "deerflow"] = "deermem",
    ) -> dict[str, Any]:
        scope = console.scope(who, user, agent)
        doc, _ = routes.stored(scope)
        if format == "deerflow":
            from deermem_middleware.formats.deerflow import to_deerflow

            return to_deerflow(doc)
        return doc.to_json_dict()


def add_whole_memory_routes(router: APIRouter, routes: Routes) -> None:
    """Numbers per user and agent, the ledger of injections, the audit log."""
    service = routes.service
    console = routes.console
    Who = Annotated[Caller, Depends(routes.caller)]

    # -- the whole memory -----------------------------------------------------------------

    @router.get("/api/stats", summary="Per user and agent: facts, sizes, injections")
    def stats(who: Who, user: str | None = None) -> dict[str, Any]:
        items = service.stats(user=user, visible=who.operator.can_see)
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
