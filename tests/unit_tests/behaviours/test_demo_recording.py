"""Replaying a recorded ``deermem demo`` run through the updater: what only the assistant said
(the tiny model's garbled French answer, its advice) is not stored as the user's; what the
user said is."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware import MemoryConfig
from deermem_middleware.cli.demo import QUESTION, SCRIPT
from deermem_middleware.extraction.extractor import ExtractionResult
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.gates.grounding import subject_words, support_for
from deermem_middleware.memory.update import MemoryUpdate
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage import InMemoryStorage, MemoryScope

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "demo_recording" / "demo_run.json"
RECORDING: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
NOW = datetime(2026, 12, 2, 6, 54, tzinfo=UTC)
SCOPE = MemoryScope(RECORDING["user_id"], "demo")


class Replayed:
    """The recorded proposal of each thread, as the extraction model returned it."""

    def __init__(self) -> None:
        self.by_thread = {t["thread"]: t["proposed"] for t in RECORDING["threads"]}

    def extract(self, memory: Memory, turns: Any, **kwargs: Any) -> ExtractionResult:
        thread = kwargs["metadata"]["deermem_thread_id"]
        update = MemoryUpdate.model_validate(self.by_thread[thread])
        return ExtractionResult(update, "json_schema", calls=1)


def replay(tmp_path: Path, **config: Any) -> Memory:
    storage = InMemoryStorage()
    extractor = Replayed()
    counter = iter(range(1000))
    updater = MemoryUpdater(
        storage,
        lambda: extractor,  # type: ignore[arg-type,return-value]
        MemoryConfig(storage_path=str(tmp_path), agent_name="demo", **config),
        clock=lambda: NOW,
        id_factory=lambda: f"fact_{next(counter):03d}",
    )
    for thread in RECORDING["threads"]:
        turns = tuple(Turn.from_dict(t) for t in thread["turns"])
        outcome = updater.run(CaptureJob(SCOPE, thread["thread"], turns))
        assert outcome.status in ("applied", "unchanged")
    return storage.load(SCOPE).memory


def test_the_recording_is_the_demos_conversation() -> None:
    first, second = RECORDING["threads"]
    assert [t["text"] for t in first["turns"] if t["role"] == "user"] == list(SCRIPT)
    assert [t["text"] for t in second["turns"] if t["role"] == "user"] == [QUESTION]


def test_replay_keeps_what_the_user_said_and_drops_the_assistants_text(tmp_path: Path) -> None:
    memory = replay(tmp_path)
    stored = sorted(f.content for f in memory.facts)
    assert stored == sorted(RECORDING["user_said"])
    assert not set(stored) & set(RECORDING["not_said_by_the_user"])


def test_no_stored_fact_rests_on_assistant_text_alone(tmp_path: Path) -> None:
    memory = replay(tmp_path)
    user_texts = [
        t["text"] for th in RECORDING["threads"] for t in th["turns"] if t["role"] == "user"
    ]
    subjects = subject_words()
    for fact in memory.facts:
        support = support_for(fact.content, user_texts, subjects=subjects)
        assert support.supported, (fact.content, support)


def test_without_the_gates_the_recording_stores_the_garbled_preference(tmp_path: Path) -> None:
    """What the gates prevent: the demo's failure as it was reported."""
    memory = replay(tmp_path, grounding="off", value_gate=False)
    garbled = [f for f in memory.facts if "éphémère" in f.content]
    assert [(f.category, f.confidence) for f in garbled] == [("preference", 1.0)]


@pytest.mark.parametrize("mode", ["drop", "infer"])
def test_the_garbled_preference_is_never_a_confident_fact(tmp_path: Path, mode: str) -> None:
    memory = replay(tmp_path, grounding=mode, inferred_confidence_cap=0.6)
    assert not [f for f in memory.facts if "éphémère" in f.content]  # 0.6 < threshold 0.7
