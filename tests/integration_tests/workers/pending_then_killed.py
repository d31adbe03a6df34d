"""Captures a few conversations with a long debounce, says so, and waits to be killed.

    python -m tests.integration_tests.workers.pending_then_killed STORAGE MARKER...

STORAGE is a folder or a PostgreSQL DSN. Prints ``captured pid=<pid>`` once every capture is
queued (and journaled); nothing is extracted before the kill (the debounce is an hour).
"""

from __future__ import annotations

import os
import sys
import time

from deermem_middleware import MemoryMiddleware
from deermem_middleware.testing import MarkerChatModel
from tests.integration_tests.workers.common import conversation, is_dsn, open_target, writer_config


def main(argv: list[str]) -> int:
    location, *markers = argv
    if is_dsn(location):
        storage = open_target(location)
        config = writer_config("/nonexistent", debounce_seconds=3600, max_wait_seconds=None)
    else:
        storage = None
        config = writer_config(location, debounce_seconds=3600, max_wait_seconds=None)
    mw = MemoryMiddleware(config, model=MarkerChatModel(), storage=storage)
    for number, marker in enumerate(markers):
        if not mw.capture(conversation(marker), user_id="alice", thread_id=f"t{number}"):
            raise SystemExit(f"capture of {marker} queued nothing")
    print(f"captured pid={os.getpid()}", flush=True)
    time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
