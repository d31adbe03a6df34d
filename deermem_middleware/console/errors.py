"""How the console answers a request it cannot serve: a 4xx (or 503) with a JSON body
``{"error": message, "field": where}`` a person can act on, never a 500 with a traceback.

Every route runs inside :func:`error_response`'s mapping (the console's route class calls it), so
the same answers come from the console's own app and from its router mounted into another
FastAPI app, where the host's exception handlers are not ours to set.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from deermem_middleware.memory.document import DocumentFormatError
from deermem_middleware.memory.manual import (
    DuplicateFactError,
    InvalidFactError,
    UnknownFactError,
)
from deermem_middleware.storage.base import (
    CorruptedMemoryError,
    RevisionConflict,
    StorageError,
)

__all__ = ["ApiError", "error_response", "json_error"]

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An answer other than success: ``status``, a message, the field it is about, and any
    extra JSON (e.g. the current fact of a 409)."""

    def __init__(self, status: int, message: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.extra = extra


def json_error(status: int, message: str, field: str | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(
        {"error": message, "field": field, **extra},
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:] if len(parts) > 1 else parts
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def error_response(exc: Exception) -> JSONResponse | None:
    """The answer for ``exc``, or None when it is not one the console knows (re-raised)."""
    if isinstance(exc, ApiError):
        return json_error(exc.status, exc.message, exc.field, **exc.extra)
    if isinstance(exc, RequestValidationError):
        errors = list(exc.errors())
        if not errors:
            return json_error(422, "the request is not valid")
        first = errors[0]
        field = _location(first.get("loc", ()))
        kind = first.get("type", "")
        if kind == "json_invalid":
            return json_error(400, "the request body is not valid JSON", "body")
        if kind == "string_unicode":  # JSON "\ud800": no storage can write a lone surrogate
            return json_error(400, f"{field}: not valid Unicode (a lone surrogate)", field)
        message = str(first.get("msg", "invalid value"))
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        return json_error(422, f"{field}: {message}{more}" if field else message + more, field)
    if isinstance(exc, InvalidFactError):
        return json_error(400, f"{exc.field}: {exc}", exc.field)
    if isinstance(exc, DuplicateFactError):
        return json_error(409, str(exc), "content", existing=exc.fact.id)
    if isinstance(exc, UnknownFactError):
        return json_error(404, str(exc), "id")
    if isinstance(exc, RevisionConflict):
        return json_error(
            409, "the memory kept changing while this change was being saved; try again"
        )
    if isinstance(exc, CorruptedMemoryError):
        logger.error("console: %s", exc)
        return json_error(503, f"the stored memory cannot be read: {exc}")
    if isinstance(exc, StorageError):
        logger.error("console: storage error: %s", exc)
        return json_error(503, f"the memory storage failed: {exc}")
    if isinstance(exc, DocumentFormatError):  # an imported document the reader could not repair
        return json_error(400, f"document: {str(exc).lstrip(': ')}", "document")
    if isinstance(exc, UnicodeEncodeError):  # a lone surrogate from the request, on its way out
        return json_error(400, "the request holds text that is not valid Unicode (lone surrogate)")
    return None
