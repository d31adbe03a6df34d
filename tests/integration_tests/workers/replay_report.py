"""Start on a storage folder (replaying its journal), flush, and print what memory holds.

    python -m tests.integration_tests.workers.replay_report STORAGE

Prints one JSON line: this process's pid, the facts of user alice, and how many captures were
replayed at start-up.
"""

from __future__ import annotations

import json
import os
import sys

from deermem_middleware import MemoryMiddleware
from deermem_middleware.testing import MarkerChatModel
from tests.integration_tests.workers.common import writer_config


def main(argv: list[str]) -> int:
    model = MarkerChatModel()
    middleware = MemoryMiddleware(writer_config(argv[0]), model=model)
    flushed = middleware.flush(timeout=60)
    facts = [f.content for f in middleware.get_memory("alice").facts]
    middleware.close()
    print(json.dumps({"pid": os.getpid(), "facts": facts, "flushed": flushed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
