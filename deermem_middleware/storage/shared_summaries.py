"""One document per user: the six summaries shared by all the user's agents, facts per agent.

DeerFlow's memory contract (``MemoryManager.clear_memory``, DeerMem's storage, pull request
#4594's ``?agent_name=`` routes) is that the six summaries are the *user's*: every agent of the
user reads and updates the same profile, while facts live in one bucket per agent; clearing or
importing one agent's memory keeps the shared summaries (an import for an agent writes the
document's summaries into the shared ones, as DeerMem does), and only clearing the whole user
clears them. :class:`SharedSummariesStorage` gives the engine exactly that view, as a
:class:`~deermem_middleware.storage.layer.StorageLayer`: the engine keeps asking for
(user, agent) documents, and the layer composes each from the user's one document.

**Layout.** The user's document is the one stored under (user, ``__default__``) — what the
default agent's memory always was, so it needs no migration and every tool that reads it
directly sees the user's summaries and the default agent's facts. The other agents' buckets
(their facts, threads' progress, trim counts and carry-over records: :data:`BUCKET_FIELDS`)
sit in the same document under :data:`BUCKETS_KEY`, an extra key the document model keeps.

**Why one document.** Every write is then one compare-and-set of one document, on every
backend: an extraction for agent X that changes a summary *and* X's facts stores both or
neither. Two documents (summaries apart, facts apart) would need two compare-and-sets, and a
crash or a lost race between them would leave an extraction half applied. On a race — agent X's
extraction and agent Y's (or a gateway edit) loading the same revision — one save wins, the
other gets a revision conflict, reloads the user's document (with the winner's summaries and
buckets) and re-applies its change to its own view: nothing is lost, and no view is ever
written back over another agent's bucket, because the layer re-composes the document from
what is stored at each attempt. The revision of a view is the user's document's, so a
summary changed through agent Y changes the revision agent X's caches are keyed by (derived
indexes, the engine's reads): X's next read sees it. The price is that a write for one agent
invalidates every agent's cached view of that user — a user's agents write rarely compared
with how often they read.

**Derived data.** The layer sits *under* the engine's deriving layer: a write's ``derive``
hook is given the whole user's document, with every bucket's facts in it, so the one snapshot
stored with the document covers the facts of every agent (row by text digest; a view that is
the whole document, one agent with facts, is read row for row).

**Written before (per-agent summaries).** A document stored under (user, X) by a version
without this layer is adopted the first time X is used in a process (one compare-and-set of
the user's document, skipped when X already has a bucket): its facts, threads' progress, trim
count and carry-over record become X's bucket; each of its summaries replaces the shared one
when the shared one is empty or older (``updatedAt``) — the rule ``deermem import`` merges
summaries by. The old document is left where it was, untouched (a summary that lost to a newer
shared one is still there to read), is no longer read or written, and goes with the user or the
agent when they are erased.

**Where it applies.** The engine uses this layer when its configuration is DeerFlow's (its
memory lives in DeerFlow's data folder): the DeerFlow backend, and the middleware or the
``deermem`` command reading DeerFlow's ``config.yaml``, which must see the very documents
the backend writes. An application of its own (the middleware or the node pair with their own
config) keeps one document per (user, agent), summaries included: there an "agent" is whatever
the application calls one — often a tenant-like product area with a profile of its own — and
sharing summaries across them would mix them without the host having asked for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from pydantic import ValidationError

from deermem_middleware.memory.document import (
    SECTION_FIELDS,
    USER_FIELDS,
    Fact,
    History,
    Memory,
    UserContext,
)
from deermem_middleware.storage.base import (
    DEFAULT_AGENT,
    CorruptedMemoryError,
    Derive,
    MemoryScope,
    MemoryStorage,
    Mutate,
    PurgeReceipt,
    RevisionConflict,
    StoredMemory,
)
from deermem_middleware.storage.layer import StorageLayer

__all__ = [
    "BUCKETS_KEY",
    "BUCKET_FIELDS",
    "HOME_AGENT",
    "SharedSummariesStorage",
    "adopted",
    "bucket_agents",
    "flattened",
    "has_bucket",
    "view_of",
    "with_view",
    "without_bucket",
]

logger = logging.getLogger(__name__)

HOME_AGENT: Final = DEFAULT_AGENT
"""The agent under whose scope the user's document is stored (its bucket: the top level)."""
BUCKETS_KEY: Final = "agentBuckets"
"""The key of the other agents' buckets in the user's document: ``{agent: {facts, ...}}``."""
LISTED_USERS: Final = 100_000
"""Users whose agents :meth:`SharedSummariesStorage.list_scopes` remembers (then it starts over)."""
BUCKET_FIELDS: Final = ("facts", "watermarks", "trimmed", "carriedOver")
"""What is an agent's own in a view; everything else (summaries, version, ...) is shared."""


# -- the algebra (pure) ---------------------------------------------------------------------------


def _buckets(home: Memory) -> dict[str, Any]:
    found = (home.model_extra or {}).get(BUCKETS_KEY)
    return dict(found) if isinstance(found, Mapping) else {}


def bucket_agents(home: Memory) -> list[str]:
    """The agents with a bucket of their own in the user's document (the home agent aside)."""
    return sorted(str(agent) for agent in _buckets(home))


def has_bucket(home: Memory, agent: str) -> bool:
    """Whether ``agent`` has a bucket in the user's document (the home agent: always)."""
    return agent == HOME_AGENT or agent in _buckets(home)


def view_of(home: Memory, agent: str) -> Memory:
    """The (user, ``agent``) document: the user's summaries with ``agent``'s bucket.
    :class:`ValueError` when the stored bucket is not a valid one."""
    buckets = _buckets(home)
    if agent == HOME_AGENT and not buckets and BUCKETS_KEY not in (home.model_extra or {}):
        return home
    data = home.to_json_dict()
    data.pop(BUCKETS_KEY, None)
    if agent != HOME_AGENT:
        for name in BUCKET_FIELDS:
            data.pop(name, None)
        bucket = buckets.get(agent) or {}
        if not isinstance(bucket, Mapping):
            raise ValueError(f"the bucket of agent {agent!r} is not an object")
        data.update({k: v for k, v in bucket.items() if k in BUCKET_FIELDS})
    return Memory.from_json_dict(data)


def with_view(home: Memory, agent: str, view: Memory) -> Memory:
    """The user's document with ``view`` as (user, ``agent``)'s: its summaries (and other
    shared keys) become the user's, its bucket ``agent``'s; the other buckets are kept."""
    shared = view.to_json_dict()
    shared.pop(BUCKETS_KEY, None)
    current = home.to_json_dict()
    buckets = dict(current.get(BUCKETS_KEY) or {})
    if agent == HOME_AGENT:
        data = shared
    else:
        buckets[agent] = {k: shared.pop(k) for k in BUCKET_FIELDS if k in shared}
        data = {**shared, **{k: current[k] for k in BUCKET_FIELDS if k in current}}
    if buckets:
        data[BUCKETS_KEY] = buckets
    return Memory.from_json_dict(data)


def without_bucket(home: Memory, agent: str) -> Memory:
    """The user's document without ``agent``'s bucket (the home agent's: emptied), shared
    summaries kept; ``home`` itself when there is no such bucket."""
    if agent == HOME_AGENT:
        if not (home.facts or home.watermarks or home.trimmed or home.carriedOver):
            return home
        empty: dict[str, Any] = {
            "facts": (),
            "watermarks": {},
            "trimmed": None,
            "carriedOver": None,
        }
        return home.model_copy(update=empty)
    buckets = _buckets(home)
    if agent not in buckets:
        return home
    del buckets[agent]
    data = home.to_json_dict()
    data[BUCKETS_KEY] = buckets
    if not buckets:
        del data[BUCKETS_KEY]
    return Memory.from_json_dict(data)


def _bucket_facts(home: Memory) -> list[Fact]:
    """Every other agent's facts, in bucket order; a fact that does not validate is left out
    (logged): it is only for deriving, and a view holding it reports it when read."""
    facts: list[Fact] = []
    for agent, bucket in sorted(_buckets(home).items()):
        items = bucket.get("facts") if isinstance(bucket, Mapping) else None
        for item in items if isinstance(items, list) else []:
            try:
                facts.append(Fact.model_validate(item))
            except ValidationError:
                logger.warning("memory: a fact of agent %r's bucket is not valid", agent)
    return facts


def flattened(home: Memory) -> Memory:
    """The user's document with every agent's facts in ``facts`` (home agent's first): what
    one derived snapshot is made of."""
    facts = _bucket_facts(home)
    return home.model_copy(update={"facts": (*home.facts, *facts)}) if facts else home


def adopted(home: Memory, agent: str, legacy: Memory) -> Memory:
    """The user's document with ``legacy`` — (user, ``agent``)'s document from before shared
    summaries — adopted as ``agent``'s bucket (see the module docstring); ``home`` itself when
    ``agent`` already has one."""
    if has_bucket(home, agent):
        return home
    view = view_of(home, agent)
    sections = {
        n: legacy.section(n)
        for n in SECTION_FIELDS
        if view.section(n).replaced_by(legacy.section(n))
    }
    user: UserContext = view.user.model_copy(
        update={n: s for n, s in sections.items() if n in USER_FIELDS}
    )
    history: History = view.history.model_copy(
        update={n: s for n, s in sections.items() if n not in USER_FIELDS}
    )
    own = {name: getattr(legacy, name) for name in BUCKET_FIELDS}
    stamp = max(view.lastUpdated, legacy.lastUpdated)
    merged = view.model_copy(update={**own, "user": user, "history": history, "lastUpdated": stamp})
    return with_view(home, agent, merged)


# -- the layer ------------------------------------------------------------------------------------


def _flat_derive(derive: Derive) -> Derive:
    """``derive`` of the user's document given every agent's facts (see :func:`flattened`);
    an unchanged document stays the very object that is stored (the hook tests identity)."""

    def hook(memory: Memory, stored: StoredMemory) -> bytes | None:
        flat_stored = flattened(stored.memory)
        flat = flat_stored if memory is stored.memory else flattened(memory)
        return derive(flat, replace(stored, memory=flat_stored))

    return hook


class SharedSummariesStorage(StorageLayer):
    """``inner`` with one document per user: summaries shared, facts per agent (see the
    module docstring)."""

    def __init__(self, inner: MemoryStorage) -> None:
        super().__init__(inner)
        self._adopted: set[MemoryScope] = set()
        self._guard = threading.Lock()
        self._listed: dict[MemoryScope, tuple[int, list[str]]] = {}
        """Each user's agents with a bucket, by the revision they were read at."""

    @staticmethod
    def home(scope: MemoryScope) -> MemoryScope:
        """Where the document of ``scope``'s user is stored."""
        return MemoryScope(scope.user_id, HOME_AGENT)

    def _view(self, scope: MemoryScope, home: Memory) -> Memory:
        try:
            return view_of(home, scope.agent_name)
        except (ValueError, ValidationError) as exc:
            where = self.inner.describe(self.home(scope))
            reason = f"agent {scope.agent_name!r}'s bucket: {str(exc).splitlines()[0]}"
            raise CorruptedMemoryError(where, reason) from exc

    def _adopt(self, scope: MemoryScope) -> None:
        """Adopt (user, agent)'s document from before shared summaries, once per process."""
        if scope.agent_name == HOME_AGENT or scope in self._adopted:
            return
        legacy = self.inner.load(scope)
        if legacy.revision > 0:
            revision = self.inner.update(
                self.home(scope), lambda home: adopted(home, scope.agent_name, legacy.memory)
            )
            logger.info(
                "memory: user %r agent %r: the agent's document from before shared summaries "
                "(%s, revision %d, %d fact(s)) is the agent's bucket in the user's document "
                "(revision %d); the old document is left as it was",
                scope.user_id,
                scope.agent_name,
                self.inner.describe(scope),
                legacy.revision,
                len(legacy.memory.facts),
                revision,
            )
        with self._guard:
            self._adopted.add(scope)

    # -- reads ------------------------------------------------------------------------------------

    def load(self, scope: MemoryScope) -> StoredMemory:
        self._adopt(scope)
        stored = self.inner.load(self.home(scope))
        return replace(stored, memory=self._view(scope, stored.memory))

    def revision(self, scope: MemoryScope) -> int:
        self._adopt(scope)
        return self.inner.revision(self.home(scope))

    def holds(self, scope: MemoryScope) -> bool:
        """Whether (user, agent) has a bucket (the home agent: whether the user has a
        document at all)."""
        self._adopt(scope)
        stored = self.inner.load(self.home(scope))
        return stored.revision > 0 and has_bucket(stored.memory, scope.agent_name)

    def list_scopes(self) -> list[MemoryScope]:
        """Every (user, agent) with a bucket, and every document from before shared summaries
        (read through its user's document). A user's agents are read from the user's document
        once per revision of it (else: one revision check per user)."""
        found: set[MemoryScope] = set()
        for scope in self.inner.list_scopes():
            found.add(scope)
            if scope.agent_name == HOME_AGENT:
                found.update(MemoryScope(scope.user_id, a) for a in self._agents_of(scope))
        return sorted(found)

    def _agents_of(self, home_scope: MemoryScope) -> list[str]:
        revision = self.inner.revision(home_scope)
        with self._guard:
            known = self._listed.get(home_scope)
        if known is not None and known[0] == revision:
            return known[1]
        stored = self.inner.load(home_scope)
        agents = bucket_agents(stored.memory)
        with self._guard:
            if len(self._listed) >= LISTED_USERS:
                self._listed.clear()
            self._listed[home_scope] = (stored.revision, agents)
        return agents

    def describe(self, scope: MemoryScope) -> str:
        where = self.inner.describe(self.home(scope))
        if scope.agent_name == HOME_AGENT:
            return where
        return f"{where}, agent {scope.agent_name!r}'s bucket"

    # -- writes -----------------------------------------------------------------------------------

    def update(
        self,
        scope: MemoryScope,
        mutate: Mutate,
        *,
        max_conflicts: int = 200,
        derive: Derive | None = None,
    ) -> int:
        """``mutate`` of (user, agent)'s view, as one compare-and-set of the user's document
        (re-composed from what is stored at every attempt)."""
        self._adopt(scope)
        agent = scope.agent_name

        def whole(home: Memory) -> Memory:
            view = self._view(scope, home)
            changed = mutate(view)
            if changed is None or changed is view:
                return home
            return with_view(home, agent, changed)

        hook = _flat_derive(derive) if derive is not None else None
        return self.inner.update(self.home(scope), whole, max_conflicts=max_conflicts, derive=hook)

    def save(
        self,
        scope: MemoryScope,
        memory: Memory,
        expected_revision: int,
        *,
        derived: bytes | None = None,
    ) -> int:
        """``memory`` as (user, agent)'s view if the user's document is at
        ``expected_revision`` — or, with 0, if the agent has no bucket yet ("no document").
        ``derived`` (a snapshot of the view alone) is not stored: the user's document keeps
        the one it has, marked with its revision, and the engine derives it again."""
        self._adopt(scope)
        home_scope = self.home(scope)
        stored = self.inner.load(home_scope)
        held = stored.revision > 0 and has_bucket(stored.memory, scope.agent_name)
        if (expected_revision == 0 and held) or (
            expected_revision != 0 and stored.revision != expected_revision
        ):
            raise RevisionConflict(scope, expected_revision, stored.revision)
        composed = with_view(stored.memory, scope.agent_name, memory)
        return self.inner.save(home_scope, composed, stored.revision)

    def delete(self, scope: MemoryScope) -> bool:
        """Remove (user, agent)'s bucket (the home agent's: emptied; the whole document when
        it is all there is) and its document from before shared summaries."""
        home_scope = self.home(scope)
        removed = False
        if scope.agent_name != HOME_AGENT:
            removed = self.inner.delete(scope)
        stored = self.inner.load(home_scope)
        if stored.revision == 0:
            return removed
        if scope.agent_name == HOME_AGENT and not bucket_agents(stored.memory):
            return self.inner.delete(home_scope) or removed
        if not has_bucket(stored.memory, scope.agent_name):
            return removed
        before = stored.revision
        after = self.inner.update(home_scope, lambda h: without_bucket(h, scope.agent_name))
        return after != before or removed

    def purge(self, user_id: str, agent_name: str | None = None) -> PurgeReceipt:
        """Erase the user (every document: the user's and any from before shared summaries),
        or one agent: its bucket (the shared summaries stay: they are the user's) and its
        document from before shared summaries. The receipt counts every bucket's facts."""
        home_scope = MemoryScope(user_id, HOME_AGENT)
        try:
            home: Memory | None = self.inner.load(home_scope).memory
        except CorruptedMemoryError:
            home = None
        with self._guard:
            self._adopted = {s for s in self._adopted if s.user_id != user_id}
        if agent_name is None:
            receipt = self.inner.purge(user_id, None)
            for agent in bucket_agents(home) if home is not None else []:
                assert home is not None
                self._count(receipt, home_scope, agent, home)
            return receipt
        receipt = (
            self.inner.purge(user_id, agent_name) if agent_name != HOME_AGENT else PurgeReceipt()
        )
        if home is not None and has_bucket(home, agent_name):
            self._count(receipt, home_scope, agent_name, home)
            self.inner.update(home_scope, lambda h: without_bucket(h, agent_name))
        return receipt

    def _count(
        self, receipt: PurgeReceipt, home_scope: MemoryScope, agent: str, home: Memory
    ) -> None:
        try:
            facts = view_of(home, agent).facts
        except (ValueError, ValidationError):
            facts = ()
        receipt.facts += len(facts)
        receipt.texts.extend(f.content for f in facts)
        receipt.add(
            f"{self.inner.describe(home_scope)}: agent {agent!r}'s bucket ({len(facts)} fact(s))"
        )
