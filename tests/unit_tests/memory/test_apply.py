"""Applying an extraction update (:mod:`deermem_middleware.memory.apply`): what it does not
touch stays as it was read."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from deermem_middleware.extraction.parsing import parse_update
from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.document import Memory
from deermem_middleware.testing import update_json

NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
STYLE = {"summary": "Conclusions first.", "updatedAt": "2026-01-02T00:00:00Z", "scope": "user"}


def test_an_update_keeps_the_sections_we_do_not_model() -> None:
    memory = Memory.from_json_dict({"user": {"cognitiveStyle": STYLE}})
    answer = update_json(
        sections={"workContext": "Writes Go.", "topOfMind": "Shipping a release."},
        facts=[("User writes Go", "knowledge", 0.9)],
    )
    update, _ = parse_update(json.loads(answer))
    after, _ = apply_update(memory, update, now=NOW, threshold=0.7, max_facts=100)
    assert after.user.workContext.summary == "Writes Go."
    assert [f.content for f in after.facts] == ["User writes Go"]
    stored = after.to_json_dict()["user"]["cognitiveStyle"]
    assert json.dumps(stored) == json.dumps(STYLE)
