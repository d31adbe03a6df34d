"""One of several processes writing the same memory (user, agent) at the same time.

    python -m tests.integration_tests.workers.many_writers STORAGE USER AGENT PROC CYCLES MODE GO

Waits until the file ``GO`` exists (the start barrier; ``GO.ready-PROC`` says it got there), then
runs CYCLES capture -> flush cycles, each with the unique marker ``P<PROC>-C<cycle>``.

MODE:
- ``threads``: a new thread id per cycle;
- ``turns``: one thread per process, the conversation grows by one exchange per cycle;
- ``unprotected``: no middleware: a plain read-modify-write of the JSON file that ignores
  revisions (no lock, no compare-and-set), to show what the protection is for.

Prints one JSON line: proc, cycles, statuses of the update outcomes, revision conflicts, flush
timeouts, prompts that did not carry exactly one marker, seconds.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from deermem_middleware.memory.apply import apply_update
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.runtime.updater import UpdateOutcome
from deermem_middleware.storage import JSONFileStorage, MemoryScope
from deermem_middleware.testing import marker_fact
from tests.integration_tests.workers.common import (
    conversation,
    is_dsn,
    open_target,
    writer_middleware,
)


def wait_for_start(go: Path, proc: int) -> None:
    Path(f"{go}.ready-{proc}").touch()
    deadline = time.monotonic() + 300
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("start barrier never opened")
        time.sleep(0.002)


def run_protected(
    storage: str, user: str, agent: str, proc: int, cycles: int, mode: str
) -> dict[str, Any]:
    mw, model = writer_middleware(storage, agent)
    outcomes: list[UpdateOutcome] = []
    mw.add_update_listener(lambda job, outcome: outcomes.append(outcome))
    history: list[BaseMessage] = []
    flush_timeouts = 0
    lost: list[str] = []
    for cycle in range(cycles):
        marker = f"P{proc}-C{cycle:03d}"
        if mode == "threads":
            thread, messages = f"p{proc}-c{cycle:03d}", conversation(marker)
        elif mode == "shared":  # every process sees the same conversation of one thread
            marker = f"S0-C{cycle:03d}"
            history.extend(conversation(marker))
            thread, messages = "shared", list(history)
        else:
            history.extend(conversation(marker))
            thread, messages = f"p{proc}", list(history)
        before = len(outcomes)
        if not mw.capture(messages, user_id=user, thread_id=thread):
            raise SystemExit(f"capture of {marker} queued nothing")
        if not mw.flush(timeout=120):
            flush_timeouts += 1
        if mode != "shared" and (len(outcomes) == before or outcomes[-1].status != "applied"):
            lost.append(marker)  # the update failed (logged) or applied nothing
    drained = mw.close()
    return {
        "statuses": dict(Counter(o.status for o in outcomes)),
        "conflicts": sum(o.conflicts for o in outcomes),
        "flush_timeouts": flush_timeouts,
        "not_applied": lost,
        "odd_prompts": model.odd_prompts,
        "extracted": [m for call in model.calls for m in call.conversation],
        "drained": drained,
    }


def _write_json(path: Path, document: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(document, handle, ensure_ascii=False)
    os.replace(tmp, path)


def run_unprotected_store(
    storage: str, user: str, agent: str, proc: int, cycles: int
) -> dict[str, Any]:
    """The store's own last-writer-wins ``get`` + ``put`` (no compare-and-set)."""
    target = open_target(storage)
    scope = MemoryScope(user, agent)
    namespace = target.namespace(scope)
    for cycle in range(cycles):
        marker = f"P{proc}-C{cycle:03d}"
        item = target.store.get(namespace, "document")
        value = item.value if item is not None else {"revision": 0, "document": {}}
        memory = Memory.from_json_dict(value["document"])
        update = MemoryUpdate(newFacts=[NewFact(content=marker_fact(marker), confidence=0.9)])
        memory, _ = apply_update(
            memory, update, now=datetime.now(UTC), threshold=0.7, max_facts=1000
        )
        target.store.put(
            namespace,
            "document",
            {"revision": value["revision"] + 1, "document": memory.to_json_dict()},
            index=False,
        )
    target.close()
    return {"statuses": {"written": cycles}, "conflicts": 0}


def run_unprotected(storage: str, user: str, agent: str, proc: int, cycles: int) -> dict[str, Any]:
    if is_dsn(storage):
        return run_unprotected_store(storage, user, agent, proc, cycles)
    scope = MemoryScope(user, agent)
    path = JSONFileStorage(storage).path_for(scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    for cycle in range(cycles):
        marker = f"P{proc}-C{cycle:03d}"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        revision = int(data.pop("revision", 0))
        data.pop("scope", None)
        memory = Memory.from_json_dict(data)
        update = MemoryUpdate(newFacts=[NewFact(content=marker_fact(marker), confidence=0.9)])
        memory, _ = apply_update(
            memory,
            update,
            now=datetime.now(UTC),
            threshold=0.7,
            max_facts=1000,
            source=f"p{proc}-c{cycle:03d}",
        )
        document = {
            "revision": revision + 1,
            "scope": {"user_id": user, "agent_name": agent},
            **memory.to_json_dict(),
        }
        _write_json(path, document)
    return {"statuses": {"written": cycles}, "conflicts": 0}


def main(argv: list[str]) -> int:
    storage, user, agent, proc_text, cycles_text, mode, go = argv
    proc, cycles = int(proc_text), int(cycles_text)
    if mode not in ("threads", "turns", "shared", "unprotected"):
        raise SystemExit(f"unknown mode {mode!r}")
    wait_for_start(Path(go), proc)
    started = time.perf_counter()
    if mode == "unprotected":
        report = run_unprotected(storage, user, agent, proc, cycles)
    else:
        report = run_protected(storage, user, agent, proc, cycles, mode)
    report.update(proc=proc, cycles=cycles, seconds=round(time.perf_counter() - started, 2))
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
