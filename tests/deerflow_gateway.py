"""DeerFlow's gateway response models (``app/gateway/routers/memory.py``), restated for the tests
that check what DeerFlow's web UI is handed: a manager's ``get_memory``/``import_memory``/... and
a v1.0 export.

Two gateways: v2.0.0's (``StrictGateway*``: ``source`` a plain ``str``, ``null`` a validation
error) and HEAD's (``HeadGateway*``: more optional fact keys, each typed; a structured ``source``
turned into its legacy string). A document both accept is one both serve.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "GatewayHistory",
    "GatewaySection",
    "GatewayUser",
    "HeadGatewayFact",
    "HeadGatewayMemory",
    "StrictGatewayFact",
    "StrictGatewayMemory",
]


class GatewaySection(BaseModel):
    summary: str = ""
    updatedAt: str = ""


class GatewayUser(BaseModel):
    workContext: GatewaySection = Field(default_factory=GatewaySection)
    personalContext: GatewaySection = Field(default_factory=GatewaySection)
    topOfMind: GatewaySection = Field(default_factory=GatewaySection)


class GatewayHistory(BaseModel):
    recentMonths: GatewaySection = Field(default_factory=GatewaySection)
    earlierContext: GatewaySection = Field(default_factory=GatewaySection)
    longTermBackground: GatewaySection = Field(default_factory=GatewaySection)


class StrictGatewayFact(BaseModel):
    """v2.0.0's gateway fact: ``source`` a plain ``str`` (``null`` is a validation error)."""

    id: str
    content: str
    category: str = "context"
    confidence: float = 0.5
    createdAt: str = ""
    source: str = "unknown"


class HeadGatewayFact(StrictGatewayFact):
    """HEAD's gateway fact: more optional keys; ``source`` as a string or structured."""

    categoryExtension: str | None = None
    topics: list[str] | None = None
    sourceError: str | None = None
    schemaVersion: int | None = None
    status: str | None = None
    scope: dict[str, str | None] | None = None
    revision: int | None = None
    updatedAt: str | None = None
    consolidatedAt: str | None = None
    consolidatedFrom: list[str] | None = None

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if not isinstance(value, dict):
            return "unknown"
        if value.get("type") == "conversation" and value.get("threadId"):
            return value["threadId"]
        return value.get("type") or value.get("threadId") or "unknown"


class StrictGatewayMemory(BaseModel):
    model_config = ConfigDict(extra="ignore")
    version: str = "1.0"
    lastUpdated: str = ""
    user: GatewayUser = Field(default_factory=GatewayUser)
    history: GatewayHistory = Field(default_factory=GatewayHistory)
    facts: list[StrictGatewayFact] = Field(default_factory=list)


class HeadGatewayMemory(StrictGatewayMemory):
    revision: int | None = None
    facts: list[HeadGatewayFact] = Field(default_factory=list)  # type: ignore[assignment]
