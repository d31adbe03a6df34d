"""Isolation, property-based: random users x agents x threads never see each other's memory.

Ids come from one small shared pool (plus short random strings over a tiny alphabet), so the same
name keeps turning up as a user, an agent and a thread — with unicode, ``a/b``, ``..``, spaces,
``%41`` next to ``A``, and long ids whose file names are a shared prefix plus a hash. A random
sequence of captures (each adding one exchange with a unique marker to its (user, agent, thread)
conversation) and flushes runs against one ``MemoryMiddleware`` per agent, all sharing one
storage; the debounce is long, so captures of a thread coalesce until a flush. The deterministic
extraction model turns every marker of the conversation it is shown into one fact.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from deermem_middleware import MemoryConfig, MemoryMiddleware
from deermem_middleware.storage import InMemoryStorage, JSONFileStorage, MemoryStorage
from deermem_middleware.testing import MARKER, MarkerChatModel, marker_of

LONG = "x" * 300
POOL = [
    "a",
    "b",
    "A",
    "%41",
    "a/b",
    "..",
    ".",
    "a b",
    "ü",
    "u\u0308",  # the same "ü", decomposed: a different id
    "日本",
    "default",
    "__default__",
    LONG,
    LONG + "y",  # same file-name prefix as LONG, different hash
]
ids = st.one_of(
    st.sampled_from(POOL),
    st.text(alphabet="ab/.ü %", min_size=1, max_size=3).filter(lambda s: s.strip() != ""),
)
Capture = tuple[str, str, str]


TWINS = [
    ("A", "%41"),  # an id that looks like the other's percent-encoding
    ("a/b", "a%2Fb"),
    ("..", "%2E."),
    ("ü", "u\u0308"),  # composed and decomposed: different ids
    ("a b", "a_b"),
    ("default", "Default"),
    (LONG, LONG + "y"),  # same file-name prefix, different hash
]


AGENT_TWINS = [
    # agent names are restricted to [A-Za-z0-9_-]: look-alikes within that alphabet
    ("a", "A"),
    ("a-b", "a_b"),
    ("default", "__default__"),
    ("x" * 200, "x" * 200 + "y"),  # same file-name prefix, different hash
]
agent_ids = st.one_of(
    st.sampled_from([a for pair in AGENT_TWINS for a in pair]),
    st.text(alphabet="aA_-", min_size=1, max_size=3),
)


def _dimension(
    draw: st.DrawFn, pool: st.SearchStrategy[str] = ids, twins: list[tuple[str, str]] = TWINS
) -> list[str]:
    """1-4 distinct ids, often including a pair of look-alikes."""
    chosen = draw(st.lists(pool, max_size=2))
    if draw(st.booleans()):
        chosen.extend(draw(st.sampled_from(twins)))
    return list(dict.fromkeys(chosen)) or [draw(pool)]


@st.composite
def steps(draw: st.DrawFn) -> list[Capture | None]:
    """Captures on (user, agent, thread) drawn from a few ids per dimension (so threads of one
    scope repeat and coalesce, and one name serves several dimensions), and flushes (None)."""
    users, threads = _dimension(draw), _dimension(draw)
    agents = _dimension(draw, agent_ids, AGENT_TWINS)
    capture = st.tuples(st.sampled_from(users), st.sampled_from(agents), st.sampled_from(threads))
    flush = st.none()
    return draw(st.lists(st.one_of(capture, capture, capture, flush), min_size=1, max_size=30))


LOOK_ALIKES: list[Capture | None] = [
    *(
        capture
        for first, second in TWINS
        for capture in (
            (first, "a", "t"),
            (second, "a", "t"),  # look-alike users
            ("u", "a", first),
            ("u", "a", second),  # look-alike threads
            ("u", "a", first),  # coalesces with the pending capture of the same thread
        )
    ),
    *(("u", agent, "t") for pair in AGENT_TWINS for agent in pair),  # look-alike agents
    None,
    ("u", "a", "t"),
]
"""Always tried: every pair of look-alike ids in every dimension."""


def _config(storage_path: str) -> MemoryConfig:
    return MemoryConfig(
        storage_path=storage_path,
        embeddings="none",
        debounce_seconds=3600,
        max_wait_seconds=None,
        top_k=1000,  # inject every fact, so the block shows everything the scope holds
        max_injection_tokens=1_000_000,
        max_facts=1000,
        flush_on_exit_seconds=None,
    )


def _exchange(marker: str) -> list[BaseMessage]:
    return [
        HumanMessage(f"Note for later: my marker is {marker}."),
        AIMessage(f"Noted, your marker is {marker}."),
    ]


def _run(storage: MemoryStorage, storage_path: str, sequence: list[Capture | None]) -> None:
    model = MarkerChatModel()
    config = _config(storage_path)
    middlewares: dict[str, MemoryMiddleware] = {}
    conversations: dict[Capture, list[BaseMessage]] = defaultdict(list)
    captured: dict[Capture, set[str]] = defaultdict(set)
    try:
        for number, step in enumerate(sequence):
            if step is None:
                for mw in middlewares.values():
                    assert mw.flush(timeout=30)
                continue
            user, agent, thread = step
            if agent not in middlewares:
                middlewares[agent] = MemoryMiddleware(
                    config, model=model, agent_name=agent, storage=storage
                )
            marker = f"Q{number}-C{number}"
            conversations[step].extend(_exchange(marker))
            captured[step].add(marker)
            assert middlewares[agent].capture(
                list(conversations[step]), user_id=user, thread_id=thread
            )
        for mw in middlewares.values():
            assert mw.flush(timeout=30)

        # every extraction saw one thread's new turns and its own scope's memory, nothing else
        for call in model.calls:
            key = (
                call.metadata["deermem_user_id"],
                call.metadata["deermem_agent_name"],
                call.metadata["deermem_thread_id"],
            )
            assert set(call.conversation) <= captured[key], (key, call)
            same_scope = set().union(*(m for k, m in captured.items() if k[:2] == key[:2]))
            assert set(call.memory) <= same_scope, (key, call)

        # stored and injected memory: exactly the scope's markers, each from its own thread
        users = {user for user, _, _ in captured}
        query = [HumanMessage("Which markers did I mention?")]
        for agent, mw in middlewares.items():
            for user in users:
                expected = {
                    marker: thread
                    for (u, a, thread), markers in captured.items()
                    if (u, a) == (user, agent)
                    for marker in markers
                }
                memory = mw.get_memory(user)
                stored = {marker_of(f.content): f.source for f in memory.facts}
                assert stored == expected, (user, agent)
                assert len(memory.facts) == len(expected)
                block = mw.render_memory(query, user_id=user)
                assert set(MARKER.findall(block)) == set(expected), (user, agent, block)
    finally:
        for mw in middlewares.values():
            mw.close(timeout=10)


@pytest.mark.parametrize("backend", ["memory", "json"])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(sequence=steps())
@example(sequence=LOOK_ALIKES)
def test_users_agents_and_threads_stay_isolated(
    backend: str, sequence: list[Capture | None]
) -> None:
    """Injection and storage of (user, agent) hold only that pair's markers, each fact's source
    is its thread, and a later capture of a thread replaces only that thread's pending work."""
    with tempfile.TemporaryDirectory() as folder:
        root = str(Path(folder) / "memory")
        storage: MemoryStorage = (
            InMemoryStorage() if backend == "memory" else JSONFileStorage(root, fsync=False)
        )
        _run(storage, root, sequence)
