"""The console as one ASGI app: the page, the login, and the API
(:func:`~deermem_middleware.console.api.console_router`).

.. code-block:: python

    from deermem_middleware.console import create_console_app
    app = create_console_app(config_path="config.yaml", tokens={"s3cret": ("sam", "edit")})
    # uvicorn module:app — or mount it: host_app.mount("/memory", app)

**The page needs no build step.** It is three static files shipped in the package (HTML, one
script, one stylesheet) with no framework: what a browser runs is what is in the wheel. Every
text from memory is put on the page with ``textContent`` (never as HTML), and the responses carry
a Content-Security-Policy that allows only the page's own script and style, so even a missed spot
could not run a ``<script>`` a conversation smuggled into a fact.

**What is served without a credential:** the login page and its stylesheet — no memory, no
script. Everything else (the page's script, the app shell, every API call, the OpenAPI schema)
needs a bearer token or a session cookie.

Paths are relative throughout, so the app works mounted under any prefix (``/memory``) in a
FastAPI or Starlette app, a LangGraph server's ``http.app`` included.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from deermem_middleware.console.api import console_router
from deermem_middleware.console.auth import ConsoleAuth, Operator, Role
from deermem_middleware.console.errors import json_error
from deermem_middleware.console.state import COOKIE, Console, read_body

__all__ = ["SECURITY_HEADERS", "create_console_app"]

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_MAX_LOGIN_BODY: Final = 8 * 1024


def _static(name: str) -> bytes:
    return resources.files("deermem_middleware.console").joinpath("static", name).read_bytes()


def _login_page(message: str = "", status: int = 200) -> HTMLResponse:
    text = _static("login.html").decode("utf-8")
    note = f'<p class="error" role="alert">{html.escape(message)}</p>' if message else ""
    return HTMLResponse(text.replace("<!--message-->", note), status_code=status)


def create_console_app(
    service: Any = None,
    *,
    config_path: str | Path | None = None,
    auth: ConsoleAuth | None = None,
    tokens: Mapping[str, tuple[str, Role]] | None = None,
    operators: Any = None,
    max_body_bytes: int | None = None,
    audit_max_entries: int | None = None,
) -> FastAPI:
    """The console app over ``service`` (a :class:`MemoryService`; by default a tool engine on
    the storage of ``config_path`` or the default config, capture off).

    Credentials: ``auth`` (a :class:`ConsoleAuth`), or ``tokens`` (``{token: (name, role)}``),
    or ``operators`` (a path to an operators file, see
    :mod:`~deermem_middleware.console.operators`). With none, no token opens it: use
    ``app.state.console.auth.issue_link(...)`` (what ``deermem console`` does).
    """
    if service is None:
        from deermem_middleware.runtime.tool import tool_config, tool_engine

        service = tool_engine(tool_config(config_path))
    if auth is None:
        auth = ConsoleAuth()
        if operators is not None:
            from deermem_middleware.console.operators import load_operators

            for digest, operator in load_operators(Path(operators)):
                auth.tokens[digest] = operator
    for token, (name, role) in (tokens or {}).items():
        auth.add_token(Operator(name, role), token)
    options: dict[str, Any] = {}
    if max_body_bytes is not None:
        options["max_body_bytes"] = max_body_bytes
    if audit_max_entries is not None:
        options["audit_max_entries"] = audit_max_entries
    console = Console(service, auth, **options)

    app = FastAPI(
        title="deermem_middleware memory console",
        version="1",
        description="See and correct what the memory holds, per user and agent.",
        openapi_url=None,  # served behind a credential by the router
        docs_url=None,
        redoc_url=None,
    )
    app.state.console = console
    app.include_router(console_router(console))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # an unknown path or method answers in the console's shape too
        return json_error(exc.status_code, str(exc.detail))

    @app.middleware("http")
    async def headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def cookie(response: Response, request: Request, session_id: str) -> None:
        response.set_cookie(
            COOKIE,
            session_id,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=request.scope.get("root_path") or "/",
        )

    @app.get("/", include_in_schema=False)
    def index(request: Request) -> Response:
        if console.caller(request) is None:
            return _login_page()
        return HTMLResponse(_static("index.html"))

    @app.get("/app.js", include_in_schema=False)
    def script(request: Request) -> Response:
        if console.caller(request) is None:
            return Response("not logged in", status_code=401, media_type="text/plain")
        return Response(_static("app.js"), media_type="text/javascript")

    @app.get("/app.css", include_in_schema=False)
    def style() -> Response:
        return Response(_static("app.css"), media_type="text/css")

    @app.get("/login", include_in_schema=False)
    def login_link(request: Request, token: str = "") -> Response:
        session = console.auth.redeem_link(token)
        if session is None:
            return _login_page(
                "This login link was already used or has expired. Ask for a new one, or paste "
                "your token.",
                401,
            )
        response = RedirectResponse("./", status_code=303)
        cookie(response, request, session.id)
        return response

    @app.post("/login", include_in_schema=False)
    async def login_form(request: Request) -> Response:
        body = await read_body(request, _MAX_LOGIN_BODY)
        if body is None:
            return _login_page("The form was too large.", 413)
        token = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0].strip()
        session = console.auth.login(token)
        if session is None:
            return _login_page("That token is not known.", 401)
        response = RedirectResponse("./", status_code=303)
        cookie(response, request, session.id)
        return response

    @app.post("/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        caller = console.caller(request)
        if caller is not None and caller.session is not None:
            sent = request.headers.get("X-CSRF-Token")
            if not console.auth.csrf_ok(caller.session, sent):
                return Response("missing CSRF token", status_code=403, media_type="text/plain")
            console.auth.end_session(caller.session.id)
        response = Response(status_code=204)
        response.delete_cookie(COOKIE, path=request.scope.get("root_path") or "/")
        return response

    return app
