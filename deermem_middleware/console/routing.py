"""What the console's route groups share: the request bodies and query types, the route class
(body limit, errors as JSON) and :class:`Routes` — the engine, the caller check and the helpers
every handler uses (load a stored document or 404, a fact as JSON, the audit log).
"""

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Query, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from deermem_middleware.console.audit import AuditEntry
from deermem_middleware.console.errors import ApiError, error_response, json_error
from deermem_middleware.console.state import Caller, Console, read_body
from deermem_middleware.console.views import fact_version, fact_view
from deermem_middleware.memory.document import MAX_FACT_CHARS, Fact, Memory, utc_now_iso
from deermem_middleware.memory.manual import find_fact
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage.base import RESERVED_USER, MemoryScope

__all__ = ["Routes", "route_class"]

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


def as_stored(fact: Fact) -> dict[str, Any]:
    """A fact as its document stores it (for the audit log's before and after)."""
    return fact.model_dump(mode="json", by_alias=True, exclude_none=True)


def route_class(console: Console) -> type[APIRoute]:
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


@dataclass
class Routes:
    """The engine and the helpers of one console's handlers."""

    console: Console

    @property
    def service(self) -> MemoryService:
        return self.console.service

    def caller(self, request: Request) -> Caller:
        """The FastAPI dependency of every route: the checked caller (401/403 otherwise)."""
        return self.console.check(request)

    def stored(self, scope: MemoryScope) -> tuple[Memory, int]:
        """The document of ``scope`` and its revision; 404 when nothing is stored."""
        loaded = self.service.load(scope)
        if loaded.revision == 0 and not loaded.memory.facts:
            raise ApiError(
                404,
                f"no memory for user {scope.user_id!r}, agent {scope.agent_name!r} "
                "(see api/users; an import creates one)",
                "user",
            )
        return loaded.memory, loaded.revision

    def view(self, fact: Fact) -> dict[str, Any]:
        half_lives = self.service.config.fact_half_life_days or None
        return fact_view(fact, self.console.clock(), half_lives)

    def now(self) -> str:
        return utc_now_iso(self.console.clock())

    def audit(
        self,
        who: Caller,
        action: str,
        scope: MemoryScope,
        *,
        all_agents: bool = False,
        **fields: Any,
    ) -> None:
        """Log a change to ``scope`` (to every agent of its user with ``all_agents``)."""
        self.console.audit.record(
            AuditEntry(
                at=self.now(),
                operator=who.operator.name,
                role=who.operator.role,
                action=action,
                user=scope.user_id,
                agent=None if all_agents else scope.agent_name,
                **fields,
            )
        )

    def scopes_of(self, who: Caller) -> list[MemoryScope]:
        """Every stored scope the caller may see (never the console's own documents)."""
        return sorted(
            s
            for s in self.service.list_scopes()
            if s.user_id != RESERVED_USER and who.operator.can_see(s.user_id)
        )

    def checked_version(self, doc: Memory, fact_id: str, version: str) -> Fact:
        """The fact, if it is still the version the person loaded; 409 otherwise."""
        fact = find_fact(doc, fact_id)
        if fact_version(fact) != version:
            raise ApiError(
                409,
                "this fact was changed since you loaded it (by an agent's update or another "
                "person); nothing was saved: review the current text and make your change again",
                "version",
                current=self.view(fact),
            )
        return fact
