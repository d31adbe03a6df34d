"""The write gates inside the extraction path of :class:`MemoryUpdater`: gated once, the gated
update kept for conflicts and retried saves, the counts in the outcome and one log line."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from deermem_middleware import MemoryConfig
from deermem_middleware.extraction.extractor import ExtractionResult
from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.runtime import updater as updater_module
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater, SaveFailed
from deermem_middleware.storage import InMemoryStorage, MemoryScope, MemoryStorage, StoredMemory

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = MemoryScope("maya", "coder")

TURNS = (
    Turn("user", "Hi! I'm a backend engineer at a fintech startup in Lyon.", "id:u1"),
    Turn("assistant", "Bonjour! Je vous recommande la base de données éphémère.", "id:a1"),
    Turn("user", "Can you translate this paragraph into German for me?", "id:u2"),
    Turn("assistant", "Sure, here it is.", "id:a2"),
    Turn("user", "Thanks! Please remember that I'm allergic to peanuts.", "id:u3"),
    Turn("assistant", "Noted.", "id:a3"),
)

PROPOSED = [
    NewFact(content="User is a backend engineer at a fintech startup in Lyon", confidence=0.9),
    NewFact(content="Prefers la base de données éphémère", category="preference", confidence=1.0),
    NewFact(content="User asked to translate this paragraph into German", confidence=0.9),
    NewFact(content="User thanked the assistant", confidence=0.8),
]


class FakeExtractor:
    """Returns a fixed update; counts its calls."""

    def __init__(self, update: MemoryUpdate) -> None:
        self.update = update
        self.calls = 0

    def extract(self, memory: Memory, turns: Any, **_: Any) -> ExtractionResult:
        self.calls += 1
        return ExtractionResult(self.update, "json_schema", calls=1)


def make(
    tmp_path: Path,
    update: MemoryUpdate,
    storage: MemoryStorage | None = None,
    **config: Any,
) -> tuple[MemoryUpdater, FakeExtractor, MemoryStorage]:
    extractor = FakeExtractor(update)
    storage = storage if storage is not None else InMemoryStorage()
    counter = iter(range(1_000_000))
    updater = MemoryUpdater(
        storage,
        lambda: extractor,  # type: ignore[arg-type,return-value]
        MemoryConfig(storage_path=str(tmp_path), **config),
        clock=lambda: NOW,
        id_factory=lambda: f"fact_{next(counter):04d}",
    )
    return updater, extractor, storage


def test_gates_filter_the_proposed_facts_and_report_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="deermem_middleware")
    updater, extractor, storage = make(tmp_path, MemoryUpdate(newFacts=PROPOSED))
    outcome = updater.run(CaptureJob(SCOPE, "thread-1", TURNS))

    facts = {f.content: f for f in storage.load(SCOPE).memory.facts}
    assert set(facts) == {
        "User is a backend engineer at a fintech startup in Lyon",
        "User is allergic to peanuts",
    }
    peanuts = facts["User is allergic to peanuts"]
    assert (peanuts.confidence, peanuts.sourceKind) == (0.95, "stated")
    assert outcome.gates is not None
    assert outcome.gates.grounding_dropped == ["Prefers la base de données éphémère"]
    assert outcome.summary() == {
        **outcome.report.summary(),
        "proposed": 4,
        "grounding_dropped": 1,
        "grounding_demoted": 0,
        "value_rejected": 2,
        "remembered_boosted": 0,
        "remembered_added": 1,
    }
    assert outcome.summary()["added"] == 2
    # the outcome's extraction is what the model proposed, untouched
    assert outcome.extraction is not None and len(outcome.extraction.update.newFacts) == 4
    [line] = [r.getMessage() for r in caplog.records if "memory facts for user" in r.getMessage()]
    assert "proposed=4 stored=2 reinforced=0" in line
    assert "grounding_dropped=1 grounding_demoted=0 value_rejected=2 remembered_added=1" in line
    assert extractor.calls == 1


def test_a_proposed_fact_for_a_remembered_clause_is_boosted_not_duplicated(
    tmp_path: Path,
) -> None:
    update = MemoryUpdate(
        newFacts=[NewFact(content="Allergic to peanuts", category="context", confidence=0.75)]
    )
    updater, _, storage = make(tmp_path, update)
    outcome = updater.run(CaptureJob(SCOPE, "thread-1", TURNS))
    [fact] = storage.load(SCOPE).memory.facts
    assert (fact.content, fact.confidence, fact.sourceKind) == (
        "Allergic to peanuts",
        0.95,
        "stated",
    )
    assert outcome.gates is not None
    assert outcome.gates.summary()["remembered_boosted"] == 1
    assert outcome.gates.summary()["remembered_added"] == 0


def test_infer_mode_stores_unsupported_facts_as_inferred(tmp_path: Path) -> None:
    updater, _, storage = make(
        tmp_path,
        MemoryUpdate(newFacts=PROPOSED[:2]),
        grounding="infer",
        inferred_confidence_cap=0.7,
        value_gate=False,
    )
    updater.run(CaptureJob(SCOPE, "thread-1", TURNS))
    facts = {f.content: f for f in storage.load(SCOPE).memory.facts}
    demoted = facts["Prefers la base de données éphémère"]
    assert (demoted.confidence, demoted.sourceKind) == (0.7, "inferred")


def test_gates_off_store_what_the_model_proposed(tmp_path: Path) -> None:
    updater, _, storage = make(
        tmp_path, MemoryUpdate(newFacts=PROPOSED), grounding="off", value_gate=False
    )
    outcome = updater.run(CaptureJob(SCOPE, "thread-1", TURNS))
    assert len(storage.load(SCOPE).memory.facts) == 4
    assert outcome.gates is not None and outcome.gates.summary()["proposed"] == 4


class RacingStorage(InMemoryStorage):
    """On the first save, another writer stores a fact just before (a revision conflict)."""

    def __init__(self) -> None:
        super().__init__()
        self.raced = False

    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int, **kw: Any) -> int:
        if not self.raced:
            self.raced = True
            current = super().load(scope)
            theirs, _ = apply_update(
                current.memory,
                MemoryUpdate(newFacts=[NewFact(content="Runs marathons", confidence=0.9)]),
                now=NOW,
                threshold=0.7,
                max_facts=100,
                id_factory=lambda: "fact_other",
            )
            super().save(scope, theirs, current.revision)
        return super().save(scope, memory, expected_revision, **kw)


@pytest.fixture
def gate_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item per call of the write gates."""
    calls: list[int] = []
    real = updater_module.gate_update

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(updater_module, "gate_update", counting)
    return calls


def test_a_conflict_reapplies_the_gated_update_without_gating_again(
    tmp_path: Path, gate_calls: list[int]
) -> None:
    calls = gate_calls
    storage = RacingStorage()
    updater, extractor, _ = make(tmp_path, MemoryUpdate(newFacts=PROPOSED), storage)
    outcome = updater.run(CaptureJob(SCOPE, "thread-1", TURNS))
    assert outcome.conflicts == 1
    assert (extractor.calls, len(calls)) == (1, 1)
    assert sorted(f.content for f in storage.load(SCOPE).memory.facts) == [
        "Runs marathons",
        "User is a backend engineer at a fintech startup in Lyon",
        "User is allergic to peanuts",
    ]


class FailingOnceStorage(InMemoryStorage):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int, **kw: Any) -> int:
        if not self.failed:
            self.failed = True
            raise OSError("read-only file system")
        return super().save(scope, memory, expected_revision, **kw)

    def load(self, scope: MemoryScope) -> StoredMemory:
        return super().load(scope)


def test_a_retried_save_keeps_the_gated_update(tmp_path: Path, gate_calls: list[int]) -> None:
    calls = gate_calls
    storage = FailingOnceStorage()
    updater, extractor, _ = make(tmp_path, MemoryUpdate(newFacts=PROPOSED), storage)
    with pytest.raises(SaveFailed) as failed:
        updater.run(CaptureJob(SCOPE, "thread-1", TURNS))
    retry = failed.value.job
    assert retry.extracted is not None and retry.extracted.update is not None
    assert retry.extracted.gates is not None
    outcome = updater.run(retry)
    assert outcome.status == "applied"
    assert (extractor.calls, len(calls)) == (1, 1)
    assert outcome.gates is retry.extracted.gates
    assert {f.content for f in storage.load(SCOPE).memory.facts} == {
        "User is a backend engineer at a fintech startup in Lyon",
        "User is allergic to peanuts",
    }


class _Synonyms(Embeddings):
    """An ``Embeddings`` that knows hiking and mountain walks mean the same (and nothing else)."""

    def _vector(self, text: str) -> list[float]:
        lowered = text.lower()
        if "hiking" in lowered or "mountains" in lowered:
            return [1.0, 0.0, 0.0]
        return [0.0, 1.0, 0.0] if "x" in lowered else [0.0, 0.0, 1.0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_the_engine_gives_the_grounding_gate_its_embedding_channel(tmp_path: Path) -> None:
    """With an embedding channel configured, the service's updater checks meaning too: a
    paraphrase the user's words do not share is kept; without it, it is dropped."""
    from deermem_middleware.runtime.service import MemoryService

    turns = (
        Turn("user", "Most weekends I walk up in the mountains with my dog.", "id:u1"),
        Turn("assistant", "That sounds lovely.", "id:a1"),
    )
    update = MemoryUpdate(newFacts=[NewFact(content="Enjoys hiking", confidence=0.9)])
    stored: dict[bool, list[str]] = {}
    for semantic in (False, True):
        service = MemoryService(
            MemoryConfig(
                storage_path=str(tmp_path / str(semantic)),
                flush_on_exit_seconds=None,
                embeddings="none",
            ),
            embeddings=_Synonyms() if semantic else None,
        )
        try:
            extractor = FakeExtractor(update)
            service._updater._extractor = lambda e=extractor: e  # type: ignore[assignment,misc]
            service._updater.run(CaptureJob(SCOPE, "thread-1", turns))
            stored[semantic] = [f.content for f in service.load(SCOPE).memory.facts]
        finally:
            service.close()
    assert stored == {False: [], True: ["Enjoys hiking"]}
