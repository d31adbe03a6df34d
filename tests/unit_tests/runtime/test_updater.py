"""One memory update job: load -> new turns only -> extract -> apply -> compare-and-set save."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deermem_middleware import MemoryConfig
from deermem_middleware.extraction.extractor import ExtractionError, MemoryExtractor
from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.memory.watermark import advance_watermark
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage import (
    InMemoryStorage,
    JSONFileStorage,
    MemoryScope,
    MemoryStorage,
    RevisionConflict,
    StoredMemory,
)
from deermem_middleware.testing import ScriptedChatModel, update_json

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = MemoryScope("alice", "coder")

OLD_TURNS = (
    Turn("user", "I work at Acme as a backend developer.", "id:m1"),
    Turn("assistant", "Nice, what stack do you use there?", "id:m2"),
)
NEW_TURNS = (
    Turn("user", "Mostly Go, and I am learning Rust on weekends.", "id:m3"),
    Turn("assistant", "Rust pairs well with Go for systems work.", "id:m4"),
)

FIRST_ANSWER = update_json(
    sections={"workContext": "Backend developer at Acme."},
    facts=[("Works at Acme", "context", 0.95)],
)
SECOND_ANSWER = update_json(facts=[("Learning Rust on weekends", "goal", 0.9)])


def make_updater(
    storage: MemoryStorage, model: ScriptedChatModel | None, config: MemoryConfig
) -> MemoryUpdater:
    extractor = MemoryExtractor(model) if model is not None else None
    counter = iter(range(1_000_000))
    return MemoryUpdater(
        storage,
        lambda: extractor,
        config,
        clock=lambda: NOW,
        id_factory=lambda: f"fact_{next(counter):04d}",
    )


def human_prompt(model: ScriptedChatModel, call: int) -> str:
    return "\n".join(str(m.content) for m in model.calls[call] if m.type == "human")


@pytest.fixture(params=["memory", "json"])
def storage(request: pytest.FixtureRequest, memory_config: MemoryConfig) -> MemoryStorage:
    if request.param == "memory":
        return InMemoryStorage()
    return JSONFileStorage(memory_config.storage_path, fsync=False)


def test_first_run_applies_sections_facts_and_watermark(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """A fresh memory gets the sections, the facts (with their thread) and the thread watermark."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    outcome = make_updater(storage, model, memory_config).run(
        CaptureJob(SCOPE, "thread-1", OLD_TURNS)
    )

    assert outcome.status == "applied"
    assert outcome.new_turns == 2
    assert outcome.revision == 1
    stored = storage.load(SCOPE)
    assert stored.revision == 1
    memory = stored.memory
    assert memory.user.workContext.summary == "Backend developer at Acme."
    assert [(f.content, f.confidence, f.source) for f in memory.facts] == [
        ("Works at Acme", 0.95, "thread-1")
    ]
    assert memory.watermarks["thread-1"].turn == "id:m2"
    assert memory.watermarks["thread-1"].count == 2
    assert len(model.calls) == 1


def test_same_job_again_is_nothing_new(storage: MemoryStorage, memory_config: MemoryConfig) -> None:
    """Re-running a job whose turns are all behind the watermark makes no LLM call."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    updater = make_updater(storage, model, memory_config)
    job = CaptureJob(SCOPE, "thread-1", OLD_TURNS)
    updater.run(job)

    again = updater.run(job)
    assert again.status == "nothing_new"
    assert again.revision == 1
    assert len(model.calls) == 1
    assert storage.load(SCOPE).revision == 1


def test_only_new_turns_are_sent(storage: MemoryStorage, memory_config: MemoryConfig) -> None:
    """A later capture with the whole conversation sends only the turns after the watermark."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER, SECOND_ANSWER])
    updater = make_updater(storage, model, memory_config)
    updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))

    outcome = updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS + NEW_TURNS))
    assert outcome.status == "applied"
    assert outcome.new_turns == 2
    prompt = human_prompt(model, 1)
    for turn in NEW_TURNS:
        assert turn.text in prompt
    for turn in OLD_TURNS:
        assert turn.text not in prompt
    # the memory built from the old turns is there as context instead
    assert "Works at Acme" in prompt

    memory = storage.load(SCOPE).memory
    assert sorted(f.content for f in memory.facts) == ["Learning Rust on weekends", "Works at Acme"]
    assert memory.watermarks["thread-1"].turn == "id:m4"
    assert memory.watermarks["thread-1"].count == 4


def test_threads_have_their_own_watermarks(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """Another thread of the same user is not cut by thread-1's watermark."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER, SECOND_ANSWER])
    # SECOND_ANSWER's fact is not in OLD_TURNS: the grounding gate is not what is tested here
    config = memory_config.model_copy(update={"grounding": "off"})
    updater = make_updater(storage, model, config)
    updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    outcome = updater.run(CaptureJob(SCOPE, "thread-2", OLD_TURNS))
    assert outcome.status == "applied"
    assert len(model.calls) == 2
    assert set(storage.load(SCOPE).memory.watermarks) == {"thread-1", "thread-2"}


def test_garbage_answer_raises_and_leaves_the_file_unchanged(
    memory_config: MemoryConfig,
) -> None:
    """An answer with no JSON at all raises ExtractionError; the bytes on disk do not change."""
    storage = JSONFileStorage(memory_config.storage_path)
    model = ScriptedChatModel(answers=[FIRST_ANSWER, "I cannot help with that."])
    updater = make_updater(storage, model, memory_config)
    updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    path = Path(storage.describe(SCOPE))
    before = path.read_bytes()

    with pytest.raises(ExtractionError):
        updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS + NEW_TURNS))

    assert path.read_bytes() == before
    assert storage.load(SCOPE).revision == 1
    # the watermark did not move: the failed turns are retried by the next capture
    assert storage.load(SCOPE).memory.watermarks["thread-1"].turn == "id:m2"


def test_garbage_first_answer_writes_nothing(memory_config: MemoryConfig) -> None:
    """Failing on a brand-new memory creates no file at all."""
    storage = JSONFileStorage(memory_config.storage_path)
    model = ScriptedChatModel(answers=["Sorry, as an AI I can't do that"])
    with pytest.raises(ExtractionError):
        make_updater(storage, model, memory_config).run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    assert not Path(storage.describe(SCOPE)).exists()


class ConcurrentWriterStorage(MemoryStorage):
    """Wraps a storage; on the first save, another writer saves its own update just before."""

    def __init__(self, inner: MemoryStorage) -> None:
        self.inner = inner
        self.injected = False
        self.saves = 0

    def load(self, scope: MemoryScope) -> StoredMemory:
        return self.inner.load(scope)

    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int, **kw: Any) -> int:
        self.saves += 1
        if not self.injected:
            self.injected = True
            current = self.inner.load(scope)
            other = MemoryUpdate.model_validate(
                {
                    "user": {
                        "personalContext": {"shouldUpdate": True, "summary": "Lives in Lyon."}
                    },
                    "newFacts": [NewFact(content="Runs marathons", confidence=0.9)],
                }
            )
            theirs, _ = apply_update(
                current.memory,
                other,
                now=NOW,
                threshold=0.7,
                max_facts=100,
                source="thread-other",
                id_factory=lambda: "fact_other01",
            )
            self.inner.save(scope, theirs, current.revision)
        return self.inner.save(scope, memory, expected_revision, **kw)

    def delete(self, scope: MemoryScope) -> bool:
        return self.inner.delete(scope)

    def list_scopes(self) -> list[MemoryScope]:
        return self.inner.list_scopes()

    def describe(self, scope: MemoryScope) -> str:
        return self.inner.describe(scope)


def test_revision_conflict_reapplies_without_a_second_llm_call(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """Another writer saved between our load and save: reload, re-apply, keep both writers' work."""
    racing = ConcurrentWriterStorage(storage)
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    outcome = make_updater(racing, model, memory_config).run(
        CaptureJob(SCOPE, "thread-1", OLD_TURNS)
    )

    assert racing.injected
    assert outcome.status == "applied"
    assert outcome.conflicts == 1
    assert len(model.calls) == 1
    stored = storage.load(SCOPE)
    assert stored.revision == 2 == outcome.revision
    memory = stored.memory
    assert memory.user.personalContext.summary == "Lives in Lyon."  # theirs
    assert memory.user.workContext.summary == "Backend developer at Acme."  # ours
    assert sorted(f.content for f in memory.facts) == ["Runs marathons", "Works at Acme"]
    assert memory.watermarks["thread-1"].turn == "id:m2"


class AlwaysConflicting(ConcurrentWriterStorage):
    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int, **kw: Any) -> int:
        self.saves += 1
        raise RevisionConflict(scope, expected_revision, expected_revision + 1)


def test_endless_conflicts_give_up(memory_config: MemoryConfig) -> None:
    """Retries are bounded: after max_conflict_retries the conflict is raised."""
    storage = AlwaysConflicting(InMemoryStorage())
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    updater = MemoryUpdater(
        storage, lambda: MemoryExtractor(model), memory_config, max_conflict_retries=3
    )
    with pytest.raises(RevisionConflict):
        updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    assert storage.saves == 4
    assert len(model.calls) == 1


def test_no_model_is_reported(
    storage: MemoryStorage, memory_config: MemoryConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """Without an extraction model the job is skipped with an error log naming the fix."""
    outcome = make_updater(storage, None, memory_config).run(
        CaptureJob(SCOPE, "thread-1", OLD_TURNS)
    )
    assert outcome.status == "no_model"
    assert outcome.new_turns == 2
    assert storage.load(SCOPE).revision == 0
    errors = [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name == "deermem_middleware.runtime.updater"
    ]
    assert len(errors) == 1
    assert "no extraction model" in errors[0].getMessage()
    assert "alice" in errors[0].getMessage()


def test_low_confidence_fact_is_not_stored(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """A fact below fact_confidence_threshold is dropped; the confident one is kept."""
    assert memory_config.fact_confidence_threshold == 0.7
    answer = update_json(
        facts=[("Might like jazz", "preference", 0.5), ("Works at Acme", "context", 0.9)]
    )
    model = ScriptedChatModel(answers=[answer])
    config = memory_config.model_copy(update={"grounding": "off"})  # "jazz" is not in the turns
    outcome = make_updater(storage, model, config).run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    assert outcome.report.facts.below_threshold == 1
    assert [f.content for f in storage.load(SCOPE).memory.facts] == ["Works at Acme"]


def test_only_low_confidence_facts_is_unchanged_but_watermarked(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """Nothing worth keeping: status "unchanged", yet the watermark advances (no re-extraction)."""
    model = ScriptedChatModel(answers=[update_json(facts=[("Maybe tired", "context", 0.3)])])
    updater = make_updater(storage, model, memory_config)
    job = CaptureJob(SCOPE, "thread-1", OLD_TURNS)
    outcome = updater.run(job)
    assert outcome.status == "unchanged"
    assert storage.load(SCOPE).memory.facts == ()
    assert updater.run(job).status == "nothing_new"
    assert len(model.calls) == 1


def test_turns_without_an_answer_are_not_extracted(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """A lone user message (no assistant answer yet) is not worth an LLM call."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    outcome = make_updater(storage, model, memory_config).run(
        CaptureJob(SCOPE, "thread-1", OLD_TURNS[:1])
    )
    assert outcome.status == "nothing_new"
    assert model.calls == []


def test_scopes_are_isolated(storage: MemoryStorage, memory_config: MemoryConfig) -> None:
    """A job for one user never touches another user's memory."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    make_updater(storage, model, memory_config).run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    assert storage.load(MemoryScope("bob", "coder")).revision == 0
    assert storage.load(MemoryScope("alice", "other-agent")).revision == 0


def test_extraction_metadata_names_the_job(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """The extractor is given the user, agent and thread (for tracing)."""
    seen: dict[str, Any] = {}

    class Spy(MemoryExtractor):
        def extract(self, memory: Memory, turns: Any, **kwargs: Any) -> Any:
            seen.update(kwargs.get("metadata") or {})
            return super().extract(memory, turns, **kwargs)

    spy = Spy(ScriptedChatModel(answers=[FIRST_ANSWER]))
    MemoryUpdater(storage, lambda: spy, memory_config).run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    assert seen == {
        "deermem_user_id": "alice",
        "deermem_agent_name": "coder",
        "deermem_thread_id": "thread-1",
    }


class SameTurnsWriterStorage(ConcurrentWriterStorage):
    """On the first save, another worker has already distilled the same turns of the thread."""

    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int, **kw: Any) -> int:
        self.saves += 1
        if not self.injected:
            self.injected = True
            current = self.inner.load(scope)
            theirs = advance_watermark(current.memory, "thread-1", "id:m2", count=2, now=NOW)
            self.inner.save(scope, theirs, current.revision)
        return self.inner.save(scope, memory, expected_revision, **kw)


def test_conflict_with_a_writer_that_applied_the_same_turns(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """If the other writer already covered these turns, ours is not applied a second time."""
    racing = SameTurnsWriterStorage(storage)
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    outcome = make_updater(racing, model, memory_config).run(
        CaptureJob(SCOPE, "thread-1", OLD_TURNS)
    )
    assert outcome.status == "already_applied"
    assert outcome.conflicts == 1
    assert storage.load(SCOPE).revision == 1
    assert storage.load(SCOPE).memory.facts == ()


class PartialTurnsWriterStorage(ConcurrentWriterStorage):
    """On the first save, another worker has just stored the *older* turns of the same thread
    (it handled an earlier capture), with its own fact from them."""

    def save(self, scope: MemoryScope, memory: Memory, expected_revision: int, **kw: Any) -> int:
        self.saves += 1
        if not self.injected:
            self.injected = True
            current = self.inner.load(scope)
            other = MemoryUpdate(newFacts=[NewFact(content="Works at Acme", confidence=0.9)])
            theirs, _ = apply_update(
                current.memory, other, now=NOW, threshold=0.7, max_facts=100, source="thread-1"
            )
            theirs = advance_watermark(theirs, "thread-1", "id:m2", count=2, now=NOW, position=2)
            self.inner.save(scope, theirs, current.revision)
        return self.inner.save(scope, memory, expected_revision, **kw)


def test_turns_stored_meanwhile_by_another_worker_are_not_applied_twice(
    memory_config: MemoryConfig,
) -> None:
    """We extracted turns 1-4; meanwhile another worker stored turns 1-2. Applying ours would
    repeat 1-2, so only turns 3-4 are extracted again and applied."""
    racing = PartialTurnsWriterStorage(InMemoryStorage())
    model = ScriptedChatModel(answers=[FIRST_ANSWER, SECOND_ANSWER])
    outcome = make_updater(racing, model, memory_config).run(
        CaptureJob(SCOPE, "thread-1", OLD_TURNS + NEW_TURNS)
    )
    assert outcome.status == "applied"
    assert len(model.calls) == 2
    second_prompt = human_prompt(model, 1)
    assert "Rust" in second_prompt and "backend developer" not in second_prompt
    memory = racing.inner.load(SCOPE).memory
    assert sorted(f.content for f in memory.facts) == ["Learning Rust on weekends", "Works at Acme"]
    assert memory.watermarks["thread-1"].turn == "id:m4"
    assert memory.watermarks["thread-1"].position == 4


def test_an_older_capture_after_a_newer_one_is_nothing_new(
    storage: MemoryStorage, memory_config: MemoryConfig
) -> None:
    """Worker A stored turns 1-4; worker B then runs its older capture of turns 1-2."""
    model = ScriptedChatModel(answers=[FIRST_ANSWER])
    updater = make_updater(storage, model, memory_config)
    assert updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS + NEW_TURNS)).status == "applied"
    stale = updater.run(CaptureJob(SCOPE, "thread-1", OLD_TURNS))
    assert stale.status == "nothing_new"
    assert len(model.calls) == 1
    # a *trimmed* history (more turns than stored, watermark gone) is still read as new
    trimmed = (
        *NEW_TURNS[1:],
        Turn("user", "New topic: I adopted a cat.", "id:m9"),
        Turn("assistant", "Congratulations!", "id:m10"),
        Turn("user", "x y z", "id:m11"),
        Turn("assistant", "ok then", "id:m12"),
    )
    assert updater.run(CaptureJob(SCOPE, "thread-1", trimmed)).status in ("applied", "unchanged")
