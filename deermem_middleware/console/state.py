"""The console's state: the engine it works over, who may use it, its audit log and limits —
and the credential checks every route runs first.

One :class:`Console` serves the REST API (:func:`~deermem_middleware.console.api.console_router`)
and the page (:func:`~deermem_middleware.console.app.create_console_app`). Give it the engine the
agents use (``MemoryService.acquire(config)``, or a middleware's ``.service``) and the console
sees what they inject, including the in-process injection ledger; a standalone ``deermem
console`` opens its own engine on the same storage, with capture off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from fastapi import Request

from deermem_middleware.console.audit import DEFAULT_MAX_ENTRIES, RESERVED_USER, AuditLog
from deermem_middleware.console.auth import ConsoleAuth, Operator, Session
from deermem_middleware.console.errors import ApiError
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage.base import MemoryScope

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "DEFAULT_MAX_BODY_BYTES",
    "Caller",
    "Console",
    "read_body",
]

COOKIE: Final = "deermem_console"
CSRF_HEADER: Final = "X-CSRF-Token"
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""The largest request body (an import of a few thousand facts fits); larger gets a 413."""
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, read as it streams in; None as soon as it passes ``limit`` bytes
    (a declared Content-Length is not trusted: a chunked body has none)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request, and how: a session (cookie) or a bearer token."""

    operator: Operator
    session: Session | None = None


@dataclass
class Console:
    """The engine, the credentials, the audit log and the limits of one console."""

    service: MemoryService
    auth: ConsoleAuth
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    audit_max_entries: int = DEFAULT_MAX_ENTRIES
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    audit: AuditLog = field(init=False)

    def __post_init__(self) -> None:
        self.audit = AuditLog(self.service, self.audit_max_entries)

    # -- credentials ------------------------------------------------------------------------

    def caller(self, request: Request) -> Caller | None:
        """The bearer token's operator, else the session cookie's; None without either."""
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer":
                return None
            operator = self.auth.bearer(token.strip())
            return None if operator is None else Caller(operator)
        session = self.auth.session(request.cookies.get(COOKIE, ""))
        return None if session is None else Caller(session.operator, session)

    def check(self, request: Request) -> Caller:
        """The caller of an API request, or the 401/403 it gets: no credential, a wrong one, or
        a cookie session changing something without its CSRF token."""
        caller = self.caller(request)
        if caller is None:
            raise ApiError(
                401,
                "not logged in: send 'Authorization: Bearer <token>' or open a login link "
                "(`deermem console` prints one)",
            )
        unsafe = caller.session is not None and request.method not in _SAFE_METHODS
        if unsafe and not self.auth.csrf_ok(caller.session, request.headers.get(CSRF_HEADER)):  # type: ignore[arg-type]
            raise ApiError(
                403,
                f"missing or wrong {CSRF_HEADER} header (get it from GET api/session): "
                "a cookie session must send it with every change",
            )
        return caller

    # -- scopes -----------------------------------------------------------------------------

    def scope(self, caller: Caller, user: str, agent: str | None) -> MemoryScope:
        """The (user, agent) a request names, if the caller may see that user."""
        if not user:  # the engine would read "" as its default user
            raise ApiError(400, "user: required, a non-empty user id", "user")
        if user == RESERVED_USER:
            raise ApiError(400, f"user: {RESERVED_USER!r} is reserved for the console", "user")
        try:
            scope = self.service.scope(user, agent or None)
        except ValueError as exc:
            raise ApiError(400, f"user/agent: {exc}", "user") from None
        if not caller.operator.can_see(scope.user_id):
            raise ApiError(
                403, f"operator {caller.operator.name!r} may not see user {scope.user_id!r}", "user"
            )
        return scope

    def editor(self, caller: Caller) -> None:
        if not caller.operator.can_edit:
            raise ApiError(
                403,
                f"operator {caller.operator.name!r} has the read role: changes need the edit role",
            )
