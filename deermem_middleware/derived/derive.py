"""Deriving a memory's snapshot when it is written (pure, given what derives).

:func:`derive` takes the document about to be stored and the snapshots stored before, reuses
every row whose text (and maker) is unchanged — an update that adds five facts to a
5,000-fact memory screens and embeds five texts — and derives the rest:

- the instruction screen's verdict of every active fact's text and category, of each summary,
  and of the sentences of a summary that holds a directive (what the block reads);
- the lexical channel's hashed character n-grams and the entity rules' names, for every fact
  (cheap: about 0.1 ms a fact together);
- the fact's vector, when an embedding model is configured.

The two expensive parts — the screen (1–7 ms a text) and the vector (about 20 ms a text on 2
CPU cores with multilingual-e5-small) — are bounded by ``budget`` facts per call, newest facts
first; what is left is counted in :attr:`Derivation.missing` and derived later, in the
background, by the same function. So a 5,000-fact import is stored at once, and made complete
over a few background steps, without holding the document's lock for minutes.

What derives is passed in (:class:`Deriver`): the screen, the embedding function and its
identity; tests and benchmarks count or replace them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from deermem_middleware.derived.snapshot import (
    FACT_COLUMNS,
    KIND_CODES,
    DerivedSnapshot,
    MadeBy,
    entity_blob,
    quantize,
    text_digest,
    text_digests,
)
from deermem_middleware.derived.versions import ENTITIES_VERSION, LEXICAL_VERSION, SCREEN_VERSION
from deermem_middleware.memory.decay import last_confirmed, last_used
from deermem_middleware.memory.document import SECTION_FIELDS, Fact, Memory
from deermem_middleware.memory.time import epoch_seconds, event_date_range
from deermem_middleware.retrieval.embeddings import EmbeddingsUnavailable
from deermem_middleware.retrieval.entities import EntityIndex, extract_entities
from deermem_middleware.retrieval.lexical import CharNgramIndex, hashed_counts
from deermem_middleware.screen import TextAssessment, assess_memory_text, screened_texts

__all__ = ["Derivation", "Deriver", "active_facts", "derive", "fact_columns", "lexical_index"]

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]
"""Texts → one unit vector per text (a zero row: that text's vector was unusable)."""


def fact_columns(facts: Sequence[Fact]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per fact the :data:`~deermem_middleware.derived.snapshot.FACT_COLUMNS`, read from its
    fields, and the category names the ``category`` column indexes."""
    out = np.full((len(facts), len(FACT_COLUMNS)), np.nan)
    categories: dict[str, int] = {}
    threads: dict[str, int] = {}
    for i, fact in enumerate(facts):
        row = out[i]
        confirmed, used = last_confirmed(fact), last_used(fact)
        if confirmed is not None:
            row[0] = confirmed.timestamp()
        if used is not None:
            row[1] = used.timestamp()
        period = event_date_range(fact.eventAt)
        if period is not None:
            row[2], row[3] = period[0].timestamp(), period[1].timestamp()
        learnt = epoch_seconds(fact.createdAt)
        if learnt is not None:
            row[4] = learnt
        row[5] = fact.confidence
        row[6] = fact.used
        row[7] = fact.injections
        row[8] = threads.setdefault(fact.source, len(threads)) if fact.source else -1
        row[9] = categories.setdefault(fact.category, len(categories))
        row[10] = 1.0 if fact.manual else 0.0
    return out, tuple(categories)


def lexical_index(
    texts: Sequence[str], found: Sequence[tuple[DerivedSnapshot, int] | None]
) -> CharNgramIndex:
    """The n-gram index of ``texts``: each text's row taken from the snapshot row ``found``
    names for it, the texts without one analysed now."""
    todo = [i for i, where in enumerate(found) if where is None]
    fresh = dict(zip(todo, hashed_counts([texts[i] for i in todo]), strict=True))
    rows: list[tuple[np.ndarray, np.ndarray]] = []
    for i, where in enumerate(found):
        ids, counts = where[0].lexical_row(where[1]) if where is not None else fresh[i]
        rows.append((np.asarray(ids, dtype=np.int64), 1.0 + np.log(np.asarray(counts, float))))
    return CharNgramIndex.from_rows(rows)


def active_facts(memory: Memory) -> tuple[Fact, ...]:
    """The facts selection ranks (superseded and archived ones stay for audit only)."""
    return tuple(f for f in memory.facts if f.status == "active")


@dataclass(frozen=True)
class Deriver:
    """What derives a snapshot: the screen, and the embedding function with its identity
    (``embed`` None: no vectors)."""

    screen: Callable[[str], TextAssessment] = assess_memory_text
    embed: Embed | None = None
    embedding: str = ""
    """The embedding model's identity, stored with the vectors (see :mod:`.versions`)."""
    made_by: MadeBy = field(init=False)

    def __post_init__(self) -> None:
        if self.embed is not None and not self.embedding:
            raise ValueError(
                "Deriver: an embed function needs its model's identity (embedding=...): vectors "
                "are only reused, and read, next to the model that made them"
            )
        made_by = MadeBy(
            screen=SCREEN_VERSION,
            lexical=LEXICAL_VERSION,
            entities=ENTITIES_VERSION,
            embedding=self.embedding if self.embed is not None else "",
        )
        object.__setattr__(self, "made_by", made_by)


@dataclass(frozen=True)
class Derivation:
    """A snapshot and how it was made: ``derived`` texts screened or embedded now, ``reused``
    rows taken from an earlier snapshot, ``missing`` facts still without a verdict or (with an
    embedding model) a vector — the background's work."""

    snapshot: DerivedSnapshot
    derived: int
    reused: int
    missing: int
    analysed: int = 0
    """Facts whose n-grams or entities were computed now (not reused)."""

    @property
    def complete(self) -> bool:
        return self.missing == 0

    @property
    def changed(self) -> bool:
        """Whether anything was derived now (else the snapshot holds only reused rows)."""
        return self.derived > 0 or self.analysed > 0


@dataclass
class _Source:
    """Where a fact's parts come from: an earlier snapshot's row per part (None: derive)."""

    lexical: tuple[DerivedSnapshot, int] | None = None
    entities: tuple[DerivedSnapshot, int] | None = None
    vector: tuple[DerivedSnapshot, int] | None = None


def _sources(
    digests: np.ndarray, previous: Sequence[DerivedSnapshot], made_by: MadeBy
) -> list[_Source]:
    found = [_Source() for _ in range(len(digests))]
    keys = digests.tolist()
    for snapshot in previous:
        same = snapshot.made_by
        parts = (
            same.lexical == made_by.lexical,
            same.entities == made_by.entities,
            bool(made_by.embedding) and same.embedding == made_by.embedding,
        )
        if not any(parts):
            continue
        row_of = snapshot.row_of()
        for i, key in enumerate(keys):
            row = row_of.get(key)
            if row is None:
                continue
            source = found[i]
            if parts[0] and source.lexical is None and snapshot.lexical_rows[row]:
                source.lexical = (snapshot, row)
            if parts[1] and source.entities is None and snapshot.entity_rows[row]:
                source.entities = (snapshot, row)
            if parts[2] and source.vector is None and snapshot.vector_rows[row]:
                source.vector = (snapshot, row)
    return found


def _stored_verdicts(
    previous: Sequence[DerivedSnapshot], screen_version: str
) -> list[DerivedSnapshot]:
    return [s for s in previous if s.made_by.screen == screen_version]


def derive(
    memory: Memory,
    previous: Sequence[DerivedSnapshot] = (),
    deriver: Deriver | None = None,
    *,
    budget: int | None = None,
) -> Derivation:
    """The snapshot of ``memory``'s active facts (see the module docstring). ``previous``:
    snapshots to reuse rows from, preferred first. ``budget``: at most this many facts get a
    verdict or a vector derived now (None: all)."""
    deriver = deriver or Deriver()
    made_by = deriver.made_by
    if deriver.embed is None:  # no model here: keep the vectors another writer's model made
        kept = next((s.made_by.embedding for s in previous if s.made_by.embedding), "")
        made_by = dataclasses.replace(made_by, embedding=kept)
    facts = active_facts(memory)
    texts = [f.content for f in facts]
    n = len(facts)
    digests = text_digests(texts)
    sources = _sources(digests, previous, made_by)
    verdict_sources = _stored_verdicts(previous, made_by.screen)

    # -- verdicts: reused by text, the rest screened (facts newest first, within the budget) --
    verdicts: dict[int, TextAssessment] = {}
    reused = derived_now = 0

    def stored_verdict(key: int) -> TextAssessment | None:
        for snapshot in verdict_sources:
            found = snapshot.verdict(key)
            if found is not None:
                return TextAssessment(found[0], found[1])  # type: ignore[arg-type]
        return None

    def screen(text: str, key: int | None = None) -> TextAssessment:
        key = text_digest(text) if key is None else key
        found = verdicts.get(key) or stored_verdict(key)
        if found is None:
            found = deriver.screen(text)
        verdicts[key] = found
        return found

    for category in dict.fromkeys(f.category for f in facts):
        screen(category)
    for name in SECTION_FIELDS:
        summary = memory.section(name).summary
        if summary:
            for sentence in screened_texts(summary, screen(summary)):
                screen(sentence)

    want_vectors = deriver.embed is not None
    spent = 0
    to_embed: list[int] = []
    for i in reversed(range(n)):  # newest facts are last: derive them first
        key = int(digests[i])
        if key not in verdicts:  # a stored verdict is kept, within the budget or not
            found = stored_verdict(key)
            if found is not None:
                verdicts[key] = found
        needs_verdict = key not in verdicts
        needs_vector = want_vectors and sources[i].vector is None
        if not needs_verdict and not needs_vector:
            reused += 1
            continue
        if budget is not None and spent >= budget:
            continue
        spent += 1
        if needs_verdict:
            verdicts[key] = deriver.screen(texts[i])
            derived_now += 1
        if needs_vector:
            to_embed.append(i)

    # -- vectors --------------------------------------------------------------------------
    vector_rows = np.zeros(n, dtype=bool)
    dimension = 0
    reused_vectors: dict[int, tuple[np.ndarray, float]] = {}
    for i, source in enumerate(sources):
        if source.vector is not None:
            snapshot, row = source.vector
            if snapshot.vectors.shape[1]:
                dimension = dimension or snapshot.vectors.shape[1]
                if snapshot.vectors.shape[1] == dimension:
                    reused_vectors[i] = (snapshot.vectors[row], float(snapshot.scales[row]))
                    vector_rows[i] = True
    fresh: dict[int, np.ndarray] = {}
    to_embed.sort()  # in the document's order (the budget already chose the newest)
    if to_embed and deriver.embed is not None:
        try:
            got = np.asarray(deriver.embed([texts[i] for i in to_embed]), dtype=np.float32)
            if got.ndim != 2 or got.shape[0] != len(to_embed):
                raise ValueError(f"{got.shape} vectors for {len(to_embed)} texts")
            if dimension and got.shape[1] != dimension:
                raise ValueError(f"{got.shape[1]} dimensions, stored vectors have {dimension}")
            dimension = got.shape[1]
            for i, vector in zip(to_embed, got, strict=True):
                fresh[i] = vector
                vector_rows[i] = True
        except EmbeddingsUnavailable:  # logged by the store (once per endpoint)
            pass
        except Exception as exc:  # the endpoint failed: the facts keep no vector, retried later
            logger.warning(
                "memory derivation: embedding %d fact(s) failed (%s: %s); they are ranked "
                "lexically until a later derivation embeds them",
                len(to_embed),
                type(exc).__name__,
                exc,
            )
    vectors = np.zeros((n, dimension), dtype=np.int8)
    scales = np.zeros(n, dtype=np.float32)
    for i, (int8_row, scale) in reused_vectors.items():
        vectors[i], scales[i] = int8_row, scale
    if fresh:
        embedded = sorted(fresh)
        quantized, fresh_scales = quantize(np.stack([fresh[i] for i in embedded]))
        vectors[embedded], scales[embedded] = quantized, fresh_scales

    # -- lexical rows and entities (cheap: every fact, every time) ---------------------------
    lexical = lexical_index(texts, [s.lexical for s in sources])
    vocab, colptr, lex_row, lex_weight, lex_norm = lexical.arrays()
    entity_lists = [
        s.entities[0].entities(s.entities[1]) if s.entities is not None else extract_entities(t)
        for s, t in zip(sources, texts, strict=True)
    ]
    ent_offsets, ent_text = entity_blob(entity_lists)
    postings = EntityIndex(
        [(*f.entities, *names) for f, names in zip(facts, entity_lists, strict=True)]
    )
    names, ent_ptr, ent_post = postings.arrays()

    # -- the verdict table ----------------------------------------------------------------
    keys = np.fromiter(verdicts, dtype=np.uint64, count=len(verdicts))
    reasons = sorted({v.reason for v in verdicts.values() if v.reason})
    reason_code = {r: c + 1 for c, r in enumerate(reasons)}
    kinds = np.fromiter((KIND_CODES[v.kind] for v in verdicts.values()), np.uint8, len(verdicts))
    codes = np.fromiter(
        (reason_code.get(v.reason, 0) for v in verdicts.values()), np.uint16, len(verdicts)
    )
    by_key = np.argsort(keys, kind="stable")
    columns, categories = fact_columns(facts)
    snapshot = DerivedSnapshot(
        made_by=made_by,
        digest=digests,
        lex_vocab=vocab,
        lex_df=np.diff(colptr),
        lex_row=lex_row,
        lex_weight=lex_weight,
        lex_norm=lex_norm,
        lexical_rows=np.ones(n, dtype=bool),
        ent_offsets=ent_offsets,
        ent_text=ent_text,
        entity_rows=np.ones(n, dtype=bool),
        ent_names=np.frombuffer(
            "\x1f".join(names).encode("utf-8", "surrogatepass"), dtype=np.uint8
        ),
        ent_ptr=ent_ptr,
        ent_post=ent_post,
        vectors=vectors,
        scales=scales,
        vector_rows=vector_rows,
        columns=columns,
        verdict_digest=keys[by_key],
        verdict_kind=kinds[by_key],
        verdict_reason=codes[by_key],
        reasons=("", *reasons),
        categories=categories,
    )
    missing = int(
        sum(
            1
            for i, key in enumerate(digests.tolist())
            if key not in verdicts or (want_vectors and not vector_rows[i])
        )
    )
    analysed = sum(1 for s in sources if s.lexical is None or s.entities is None)
    return Derivation(
        snapshot=snapshot,
        derived=derived_now + len(fresh),
        reused=reused,
        missing=missing,
        analysed=analysed,
    )
