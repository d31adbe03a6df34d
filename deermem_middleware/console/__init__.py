"""The memory console: a web page and a REST API for the people who look after users' memory.

- :func:`create_console_app` — the whole console (page, login, API) as one ASGI app;
- :func:`console_router` — the API alone, for ``include_router`` in an existing FastAPI app;
- :class:`Console` — the state both share (engine, credentials, audit log, limits);
- :class:`ConsoleAuth`, :class:`Operator` — credentials and roles;
- ``deermem console`` serves it on loopback and prints a one-time login link.

Needs the ``console`` extra (FastAPI, uvicorn): ``pip install "deermem-middleware[console]"``.
The names are imported on first use, so the FastAPI-free parts (the audit log, operators files)
work without the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deermem_middleware.console.api import console_router
    from deermem_middleware.console.app import create_console_app
    from deermem_middleware.console.auth import ConsoleAuth, Operator
    from deermem_middleware.console.state import Console

__all__ = ["Console", "ConsoleAuth", "Operator", "console_router", "create_console_app"]

_HOMES = {
    "Console": "state",
    "ConsoleAuth": "auth",
    "Operator": "auth",
    "console_router": "api",
    "create_console_app": "app",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
