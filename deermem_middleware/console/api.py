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

from fastapi import APIRouter

from deermem_middleware.console.routes_change import add_changing_routes, add_import_route
from deermem_middleware.console.routes_read import (
    add_export_route,
    add_reading_routes,
    add_whole_memory_routes,
)
from deermem_middleware.console.routing import Routes, route_class
from deermem_middleware.console.state import Console

__all__ = ["console_router"]


def console_router(console: Console) -> APIRouter:
    """The API routes of ``console`` (see the module docstring), for ``app.include_router``."""
    router = APIRouter(route_class=route_class(console), tags=["memory console"])
    routes = Routes(console)
    add_reading_routes(router, routes)
    add_changing_routes(router, routes)
    add_export_route(router, routes)
    add_import_route(router, routes)
    add_whole_memory_routes(router, routes)
    return router
