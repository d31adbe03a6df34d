"""Each backend's own journal (``storage.journal()``): put, replace, done, forget."""

from __future__ import annotations

import pytest

from deermem_middleware.storage import MemoryScope, MemoryStorage
from deermem_middleware.storage.journal import job_token

from .samples import ODD, SCOPE, turns

OLDER = turns("hi", "hello")
NEWER = turns("hi", "hello", "more", "ok")


def test_put_replace_done_forget(storage: MemoryStorage) -> None:
    journal = storage.journal()
    journal.put(ODD, "thread.1/x", OLDER)
    journal.put(ODD, "thread.1/x", NEWER)  # replaces
    journal.put(SCOPE, "t2", OLDER)
    entries = {(e.scope, e.thread_id): e for e in journal.entries()}
    assert set(entries) == {(ODD, "thread.1/x"), (SCOPE, "t2")}
    assert entries[(ODD, "thread.1/x")].turns == NEWER
    journal.done(ODD, "thread.1/x", job_token(OLDER))  # stale: the newer capture stays
    assert len(journal.entries()) == 2
    journal.done(ODD, "thread.1/x", job_token(NEWER))
    assert [(e.scope, e.thread_id) for e in journal.entries()] == [(SCOPE, "t2")]
    assert journal.forget(SCOPE) == 1
    assert journal.entries() == []


def test_entries_keep_what_was_put(storage: MemoryStorage) -> None:
    journal = storage.journal()
    journal.put(SCOPE, "t1", NEWER, conversation="conv-7")
    [entry] = journal.entries()
    assert (entry.scope, entry.thread_id, entry.turns) == (SCOPE, "t1", NEWER)
    assert entry.conversation == "conv-7"
    assert entry.token == job_token(NEWER)
    assert not entry.owner_is_gone(600)  # written by this process


def test_forget_takes_one_scope_only(storage: MemoryStorage) -> None:
    journal = storage.journal()
    sibling = MemoryScope(SCOPE.user_id, "other-agent")
    for thread in ("a", "b", "c"):
        journal.put(SCOPE, thread, OLDER)
    journal.put(sibling, "a", OLDER)
    journal.put(ODD, "a", OLDER)
    assert journal.forget(SCOPE) == 3
    assert journal.forget(SCOPE) == 0
    assert sorted((e.scope, e.thread_id) for e in journal.entries()) == sorted(
        [(sibling, "a"), (ODD, "a")]
    )
    journal.put(SCOPE, "a", NEWER)  # a forgotten scope takes new captures
    assert (SCOPE, "a") in {(e.scope, e.thread_id) for e in journal.entries()}


def test_done_of_an_unknown_thread_is_harmless(storage: MemoryStorage) -> None:
    journal = storage.journal()
    journal.done(SCOPE, "never-put", job_token(OLDER))
    journal.put(SCOPE, "t", OLDER)
    journal.done(SCOPE, "other", job_token(OLDER))
    assert [e.thread_id for e in journal.entries()] == ["t"]


@pytest.mark.requires("durable_journal")
def test_entries_outlive_the_journal_object(storage: MemoryStorage) -> None:
    """A restarted process opens the journal anew and finds what its predecessor left."""
    storage.journal().put(SCOPE, "t1", NEWER)
    [entry] = storage.journal().entries()
    assert entry.turns == NEWER
    storage.journal().done(SCOPE, "t1", job_token(NEWER))
    assert storage.journal().entries() == []
