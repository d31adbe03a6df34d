"""End to end on DeerFlow itself: a file the user uploaded never reaches the memory.

DeerFlow's upload route writes the file into the thread's uploads folder
(``ensure_uploads_dir(thread_id, user_id=...)``: ``users/<user>/threads/<thread>/user-data/
uploads/``) and the UI sends the next message with the file named in
``additional_kwargs["files"]`` (``filename``, ``size``, its sandbox ``path``). DeerFlow's
``UploadsMiddleware`` then prepends a ``<current_uploads>`` block to the message — the file's
name, its ``/mnt/user-data/uploads/...`` path and an outline of its contents — and keeps what the
user typed in ``additional_kwargs["original_user_content"]``. That message is what DeerFlow
hands our backend (``aadd``). The memory must learn from the user's words only: neither the
extraction nor the stored memory nor the text ``get_context`` ranks facts by may hold the file's
name, path or outline.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from deermem_middleware.extraction.extractor import MemoryExtractor
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.retrieval.params import SelectionQuery
from tests.deerflow_host.conftest import DeerFlowHost, ManagerCalls, deerflow_module, text_of

MANAGER_CLASS = "deermem_middleware.deerflow:DeermemMemoryManager"
FLUSH_SECONDS = 240
"""DeerFlow's ``memory.shutdown_flush_timeout_seconds`` (the tiny model on shared cores)."""
USER = "maya"
THREAD = "thread-upload"
FILENAME = "zephyr-payroll-q3.md"
VIRTUAL_PATH = f"/mnt/user-data/uploads/{FILENAME}"
HEADING = "Quokka bonus ledger"
"""A heading of the file: DeerFlow puts the file's outline into the ``<current_uploads>``
block."""
FILE_BODY = f"# {HEADING}\n\nAna 1200 EUR\nRui 900 EUR\n\n## Totals\n\n2100 EUR\n"
SAYS = "I manage payroll for the Lisbon office. Please remember that I prefer short answers."
FORBIDDEN = ("zephyr-payroll", "/mnt/user-data", "user-data/uploads", HEADING, "current_uploads")
"""What of the upload must never be in memory: the file's name, its paths, its outline, the
block itself."""


@dataclass
class Seen:
    """What our backend extracted from and ranked by while the test ran."""

    extracted: list[str] = field(default_factory=list)
    ranked_by: list[str] = field(default_factory=list)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    """Records the turns every extraction reads and the query every fact selection ranks by."""
    record = Seen()
    extract = MemoryExtractor.extract
    from_turns = SelectionQuery.from_turns.__func__  # type: ignore[attr-defined]

    def recording_extract(
        self: MemoryExtractor, memory: Any, turns: Sequence[Turn], **kwargs: Any
    ) -> Any:
        record.extracted.extend(turn.text for turn in turns)
        return extract(self, memory, turns, **kwargs)

    def recording_from_turns(
        cls: type[SelectionQuery], turns: Sequence[Turn], query_turns: int = 3
    ) -> SelectionQuery:
        query = from_turns(cls, turns, query_turns)
        record.ranked_by.append(f"{query.context}\n{query.primary}")
        return query

    monkeypatch.setattr(MemoryExtractor, "extract", recording_extract)
    monkeypatch.setattr(SelectionQuery, "from_turns", classmethod(recording_from_turns))
    yield record


def upload(host: DeerFlowHost, user_id: str, thread_id: str) -> dict[str, Any]:
    """The file written where DeerFlow's upload route writes it; the ``files`` entry the UI
    sends with the next message."""
    uploads = deerflow_module("deerflow.uploads.manager")
    folder = uploads.ensure_uploads_dir(thread_id, user_id=user_id)
    assert folder.is_relative_to(host.home / "users" / user_id / "threads" / thread_id), folder
    path = folder / FILENAME
    path.write_text(FILE_BODY, encoding="utf-8")
    return {
        "filename": FILENAME,
        "size": path.stat().st_size,
        "path": VIRTUAL_PATH,
        "status": "uploaded",
    }


def leaks(text: str) -> list[str]:
    return [word for word in FORBIDDEN if word.lower() in text.lower()]


def test_an_uploaded_file_never_reaches_memory_or_the_ranking_text(
    deerflow_host: DeerFlowHost, manager_calls: ManagerCalls, seen: Seen
) -> None:
    from deermem_middleware.deerflow import DeermemMemoryManager  # imports DeerFlow

    host = deerflow_host
    host.write_config(
        {
            "manager_class": MANAGER_CLASS,
            "shutdown_flush_timeout_seconds": FLUSH_SECONDS,
            "backend_config": {"debounce_seconds": 0.5, "embeddings": "none"},
        }
    )
    manager = host.memory_manager()
    assert isinstance(manager, DeermemMemoryManager), type(manager)
    with host.gateway() as gateway:  # a fact, so that get_context has facts to rank
        response = gateway.post(
            "/api/memory/facts",
            json={"content": "Maya works in Lisbon", "category": "context", "confidence": 0.9},
            headers=host.as_user(USER),
        )
        assert response.status_code == 200, response.text

    files = upload(host, USER, THREAD)
    message = HumanMessage(SAYS, id=str(uuid.uuid4()), additional_kwargs={"files": [files]})
    turn = host.build_agent(USER, THREAD).go({"messages": [message]})
    assert turn.answers, "the real model did not answer"

    # DeerFlow's UploadsMiddleware did list the file for the model ...
    given = "\n".join(text_of(m) for m in turn.model_calls[0] if isinstance(m, HumanMessage))
    assert "<current_uploads>" in given and VIRTUAL_PATH in given and HEADING in given
    # ... and handed that message, block and all, to our backend
    [capture] = manager_calls.of("aadd")
    handed = [m for m in capture.args[1] if isinstance(m, HumanMessage) and SAYS in text_of(m)]
    assert handed and VIRTUAL_PATH in text_of(handed[-1])
    assert handed[-1].additional_kwargs.get("original_user_content") == SAYS

    # the extraction reads the user's words only
    assert host.shutdown_flush(), "the extraction did not finish within the flush budget"
    assert seen.extracted, "nothing was extracted"
    assert any(SAYS in text for text in seen.extracted), seen.extracted
    assert leaks("\n".join(seen.extracted)) == [], seen.extracted

    # nothing of the file is stored (the document as DeerFlow's Memory page shows it, and our
    # files in DeerFlow's data folder)
    with host.gateway() as gateway:
        response = gateway.get("/api/memory", headers=host.as_user(USER))
        assert response.status_code == 200, response.text
        assert leaks(json.dumps(response.json(), ensure_ascii=False)) == []
    stored = [p for p in host.ours.rglob("*") if p.is_file()]
    assert stored
    for path in stored:
        assert leaks(path.read_bytes().decode("utf-8", "replace")) == [], path

    # the user's next context is ranked by what they said, not by the file's name and outline
    seen.ranked_by.clear()
    manager.get_context(user_id=USER, agent_name=None)
    assert seen.ranked_by, "get_context ranked nothing"
    assert any("short answers" in text for text in seen.ranked_by), seen.ranked_by
    assert leaks("\n".join(seen.ranked_by)) == [], seen.ranked_by
