"""Writing one user's documents in DeerFlow's v2 layout
(:mod:`deermem_middleware.formats.deerflow_v2_writer`): the summary manifest keeps the sections
we do not model, the newest of each."""

from __future__ import annotations

import json
from pathlib import Path

from deermem_middleware.formats.deerflow_v2_writer import write_v2
from deermem_middleware.memory.document import Memory


def style(summary: str, updated: str) -> Memory:
    section = {"summary": summary, "updatedAt": updated, "scope": "user"}
    return Memory.from_json_dict({"user": {"cognitiveStyle": section}})


def test_the_manifest_keeps_the_newest_section_we_do_not_model(tmp_path: Path) -> None:
    documents = {
        "__default__": style("Conclusions first.", "2026-01-02T00:00:00Z"),
        "planner": style("Details first.", "2026-03-01T00:00:00Z"),
    }
    written = write_v2(tmp_path, "ann", documents)
    manifest = json.loads(written.manifest.read_text(encoding="utf-8"))
    assert manifest["user"]["cognitiveStyle"] == {
        "summary": "Details first.",
        "updatedAt": "2026-03-01T00:00:00Z",
        "scope": "user",
    }
    assert manifest["user"]["workContext"] == {"summary": "", "updatedAt": ""}
