"""Merging an imported document into the stored one (:mod:`deermem_middleware.formats.importing`):
the sections we do not model follow the summaries' rule."""

from __future__ import annotations

from typing import Any

from deermem_middleware.formats.importing import merge_memory
from deermem_middleware.memory.document import Memory

NOW = "2026-12-07T10:00:00Z"


def with_style(summary: str, updated: str, **more: Any) -> Memory:
    return Memory.from_json_dict(
        {"user": {"cognitiveStyle": {"summary": summary, "updatedAt": updated, **more}}}
    )


def test_a_section_we_do_not_model_is_added_when_missing() -> None:
    incoming = with_style("Conclusions first.", "2026-01-02T00:00:00Z", scope="user")
    merged, report = merge_memory(Memory(), incoming, NOW)
    assert merged.unknown_sections("user") == incoming.unknown_sections("user")
    assert report.sections == ["cognitiveStyle"]


def test_a_newer_one_replaces_an_older_one_and_an_older_one_changes_nothing() -> None:
    current = with_style("Conclusions first.", "2026-01-02T00:00:00Z")
    newer = with_style("Details first.", "2026-02-01T00:00:00Z")
    older = with_style("Bullet points.", "2025-12-01T00:00:00Z")
    merged, _ = merge_memory(current, newer, NOW)
    assert merged.unknown_sections("user")["cognitiveStyle"]["summary"] == "Details first."
    same, report = merge_memory(current, older, NOW)
    assert same is current and report.sections == []


def test_history_sections_we_do_not_model_merge_too() -> None:
    incoming = Memory.from_json_dict({"history": {"futurePlans": {"summary": "Moon."}}})
    merged, _ = merge_memory(Memory(), incoming, NOW)
    assert merged.unknown_sections("history") == {"futurePlans": {"summary": "Moon."}}
    assert merged.unknown_sections("user") == {}
