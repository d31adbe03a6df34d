"""One document per user, summaries shared by the user's agents, facts per agent
(:mod:`deermem_middleware.storage.shared_summaries`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from deermem_middleware import MemoryConfig
from deermem_middleware.derived.derive import Deriver
from deermem_middleware.derived.snapshot import decode_snapshot, text_digests
from deermem_middleware.derived.storing import DerivingStorage
from deermem_middleware.memory.document import Fact, Memory, Section, UserContext, Watermark
from deermem_middleware.runtime.service import MemoryService
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.storage.base import RevisionConflict
from deermem_middleware.storage.shared_summaries import (
    BUCKETS_KEY,
    HOME_AGENT,
    SharedSummariesStorage,
    adopted,
    flattened,
    view_of,
    with_view,
    without_bucket,
)

HOME = MemoryScope("alice", HOME_AGENT)
CODER = MemoryScope("alice", "coder")
WRITER = MemoryScope("alice", "writer")


def _fact(content: str, fact_id: str | None = None) -> Fact:
    return Fact(id=fact_id or f"fact_{abs(hash(content)) % 10**12:012d}", content=content)


def _work(memory: Memory, summary: str, at: str = "2026-05-01T00:00:00Z") -> Memory:
    user = memory.user.model_copy(update={"workContext": Section(summary=summary, updatedAt=at)})
    return memory.model_copy(update={"user": user})


def _adding(content: str, summary: str | None = None) -> Callable[[Memory], Memory]:
    def change(memory: Memory) -> Memory:
        changed = memory.model_copy(update={"facts": (*memory.facts, _fact(content))})
        return _work(changed, summary) if summary is not None else changed

    return change


@pytest.fixture
def inner(tmp_path: Path) -> JSONFileStorage:
    return JSONFileStorage(tmp_path / "store")


@pytest.fixture
def storage(inner: JSONFileStorage) -> SharedSummariesStorage:
    return SharedSummariesStorage(inner)


# -- the algebra ----------------------------------------------------------------------------------


def test_a_view_is_the_users_summaries_with_the_agents_bucket() -> None:
    home = _work(Memory(facts=(_fact("default fact"),)), "Builds pipelines")
    coder = with_view(home, "coder", _work(Memory(facts=(_fact("coder fact"),)), "Writes Rust"))
    assert coder.user.workContext.summary == "Writes Rust"  # the view's summaries are shared
    assert [f.content for f in coder.facts] == ["default fact"]  # the home bucket stays
    view = view_of(coder, "coder")
    assert [f.content for f in view.facts] == ["coder fact"]
    assert view.user.workContext.summary == "Writes Rust"
    assert BUCKETS_KEY not in (view.model_extra or {})
    assert [f.content for f in view_of(coder, HOME_AGENT).facts] == ["default fact"]
    assert [f.content for f in view_of(coder, "writer").facts] == []  # no bucket: empty
    assert view_of(home, HOME_AGENT) is home  # nothing to compose: the document itself


def test_a_home_view_written_back_keeps_the_other_buckets() -> None:
    home = with_view(Memory(), "coder", Memory(facts=(_fact("coder fact"),)))
    home = with_view(home, HOME_AGENT, Memory(facts=(_fact("mine"),)))
    assert [f.content for f in view_of(home, "coder").facts] == ["coder fact"]
    assert [f.content for f in flattened(home).facts] == ["mine", "coder fact"]


def test_without_a_bucket_the_summaries_stay() -> None:
    home = _work(Memory(facts=(_fact("default"),)), "Shared")
    home = with_view(
        home, "coder", view_of(home, "coder").model_copy(update={"facts": (_fact("c"),)})
    )
    gone = without_bucket(home, "coder")
    assert view_of(gone, "coder").facts == ()
    assert gone.user.workContext.summary == "Shared"
    emptied = without_bucket(gone, HOME_AGENT)
    assert emptied.facts == () and emptied.user.workContext.summary == "Shared"
    assert without_bucket(emptied, "writer") is emptied


def test_a_legacy_document_is_adopted_newer_summaries_winning() -> None:
    home = _work(Memory(), "Works at A", "2026-01-01T00:00:00Z")
    home = home.model_copy(
        update={"user": home.user.model_copy(update={"topOfMind": Section(summary="")})}
    )
    legacy = Memory(
        facts=(_fact("legacy fact"),),
        watermarks={"t-1": Watermark(turn="abc", count=2)},
        user=UserContext(
            workContext=Section(summary="Works at B", updatedAt="2026-03-01T00:00:00Z"),
            topOfMind=Section(summary="Moving house", updatedAt="2025-01-01T00:00:00Z"),
            personalContext=Section(summary="", updatedAt="2027-01-01T00:00:00Z"),
        ),
    )
    merged = adopted(home, "coder", legacy)
    view = view_of(merged, "coder")
    assert [f.content for f in view.facts] == ["legacy fact"]
    assert view.watermarks["t-1"].count == 2
    assert merged.user.workContext.summary == "Works at B"  # newer
    assert merged.user.topOfMind.summary == "Moving house"  # fills an empty one
    assert merged.user.personalContext.summary == ""  # an empty one never wins
    older = _work(Memory(), "Works at C", "2027-01-01T00:00:00Z")
    assert adopted(older, "coder", legacy).user.workContext.summary == "Works at C"
    assert adopted(merged, "coder", Memory(facts=(_fact("other"),))) is merged  # has a bucket


# -- the layer ------------------------------------------------------------------------------------


def test_summaries_are_shared_and_facts_are_per_agent(storage: SharedSummariesStorage) -> None:
    storage.update(CODER, _adding("Uses Rust", summary="Backend engineer"))
    before = storage.revision(WRITER)
    storage.update(WRITER, _adding("Writes essays", summary="Engineer and writer"))
    assert storage.revision(CODER) == storage.revision(WRITER) > before  # caches see it
    coder, writer, home = storage.load(CODER), storage.load(WRITER), storage.load(HOME)
    assert [f.content for f in coder.memory.facts] == ["Uses Rust"]
    assert [f.content for f in writer.memory.facts] == ["Writes essays"]
    assert home.memory.facts == ()
    for stored in (coder, writer, home):
        assert stored.memory.user.workContext.summary == "Engineer and writer"
    assert storage.inner.list_scopes() == [HOME]  # one document
    assert storage.list_scopes() == [HOME, CODER, WRITER]
    reader = MemoryScope("alice", "reader")
    storage.update(reader, _adding("Reads sci-fi"))
    assert storage.list_scopes() == [HOME, CODER, reader, WRITER]  # a new revision: read again
    assert storage.load(MemoryScope("bob", "coder")).revision == 0  # users share nothing


def test_concurrent_writers_of_different_agents_lose_nothing(
    storage: SharedSummariesStorage,
) -> None:
    agents = [MemoryScope("alice", f"agent-{i}") for i in range(4)] + [HOME]
    errors: list[BaseException] = []

    def write(scope: MemoryScope) -> None:
        try:
            for n in range(10):
                storage.update(scope, _adding(f"{scope.agent_name} fact {n}", summary=f"{n}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(scope,)) for scope in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for scope in agents:
        assert len(storage.load(scope).memory.facts) == 10
    assert storage.load(HOME).revision == 50  # one compare-and-set per write


def test_a_legacy_per_agent_document_is_adopted_once_and_left_in_place(
    inner: JSONFileStorage,
) -> None:
    inner.save(HOME, _work(Memory(facts=(_fact("default"),)), "Old", "2026-01-01T00:00:00Z"), 0)
    legacy = _work(Memory(facts=(_fact("coder legacy"),)), "Newer", "2026-02-01T00:00:00Z")
    inner.save(CODER, legacy, 0)
    storage = SharedSummariesStorage(inner)
    view = storage.load(CODER)
    assert [f.content for f in view.memory.facts] == ["coder legacy"]
    assert view.memory.user.workContext.summary == "Newer"
    assert storage.load(HOME).memory.user.workContext.summary == "Newer"
    assert [f.content for f in storage.load(HOME).memory.facts] == ["default"]
    assert inner.load(CODER).memory == legacy  # untouched
    storage.update(CODER, _adding("coder new"))
    again = SharedSummariesStorage(inner)  # another process: the bucket is there, no re-adoption
    assert [f.content for f in again.load(CODER).memory.facts] == ["coder legacy", "coder new"]
    assert again.holds(CODER) and not again.holds(WRITER)


def test_save_at_revision_zero_means_the_agent_has_no_bucket(
    storage: SharedSummariesStorage,
) -> None:
    storage.update(HOME, _adding("default"))
    revision = storage.save(CODER, Memory(facts=(_fact("first"),)), 0)
    with pytest.raises(RevisionConflict):
        storage.save(CODER, Memory(), 0)
    with pytest.raises(RevisionConflict):
        storage.save(CODER, Memory(), revision - 1)
    assert storage.save(CODER, Memory(facts=(_fact("second"),)), revision) == revision + 1
    assert [f.content for f in storage.load(HOME).memory.facts] == ["default"]


def test_erasing_one_agent_keeps_the_summaries_and_the_other_agents(
    storage: SharedSummariesStorage, inner: JSONFileStorage
) -> None:
    storage.update(CODER, _adding("coder fact", summary="Shared"))
    storage.update(WRITER, _adding("writer fact"))
    inner.save(MemoryScope("alice", "old"), Memory(facts=(_fact("old"),)), 0)
    receipt = storage.purge("alice", "coder")
    assert receipt.facts == 1 and receipt.texts == ["coder fact"]
    assert storage.load(CODER).memory.facts == ()
    assert storage.load(CODER).memory.user.workContext.summary == "Shared"
    assert [f.content for f in storage.load(WRITER).memory.facts] == ["writer fact"]
    receipt = storage.purge("alice")
    assert sorted(receipt.texts) == ["old", "writer fact"]
    assert inner.list_scopes() == []
    assert storage.load(WRITER).revision == 0


def test_one_snapshot_covers_every_agents_facts(inner: JSONFileStorage) -> None:
    storage = DerivingStorage(SharedSummariesStorage(inner), Deriver())
    storage.update(CODER, _adding("Alice uses Rust daily"))
    storage.update(WRITER, _adding("Alice writes essays on Sundays"))
    stored = storage.load(CODER)
    assert stored.derived is not None and stored.derived_revision == stored.revision
    snapshot = decode_snapshot(stored.derived)
    texts = ["Alice uses Rust daily", "Alice writes essays on Sundays"]
    row_of = snapshot.row_of()
    assert all(int(d) in row_of for d in text_digests(texts))


# -- where it applies -----------------------------------------------------------------------------


def _config(tmp_path: Path, deerflow_memory_folder: str | None = None) -> MemoryConfig:
    return MemoryConfig(
        storage_path=str(tmp_path / "store"),
        embeddings="none",
        deerflow_memory_folder=deerflow_memory_folder,
    )


def _summary_seen_by_another_agent(service: MemoryService) -> str:
    service.change(service.scope("alice", "coder"), lambda m: _work(m, "Shared?"))
    return service.load(service.scope("alice", "writer")).memory.user.workContext.summary


def test_deerflows_config_shares_summaries_an_application_of_its_own_does_not(
    tmp_path: Path,
) -> None:
    own = MemoryService(_config(tmp_path / "own"))
    deerflow = MemoryService(_config(tmp_path / "df", deerflow_memory_folder=str(tmp_path)))
    try:
        assert _summary_seen_by_another_agent(own) == ""
        assert _summary_seen_by_another_agent(deerflow) == "Shared?"
        block = deerflow.memory_block([HumanMessage("what do I do?")], "alice", "writer")
        assert "Shared?" in block
    finally:
        own.close()
        deerflow.close()
