"""The lexical channel of fact selection: TF-IDF over character n-grams (and CJK characters).

Matching word forms matters more than the ranking function (measured on LoCoMo: BM25 parameters
change nothing, character 3–5-grams within words add ~6.5 points over word tokens), and scripts
without spaces need characters: a word tokenizer scores "喝茶" 0 against "用户喜欢喝茶". Per-text
n-grams are hashed and cached, so a memory revision that adds a few facts analyses only those;
the index is stored column-major so a query reads only its own n-grams' columns.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer

__all__ = ["CharNgramIndex", "WordTfidfIndex", "analyze_text", "hashed_counts"]

_N_FEATURES = 1 << 22  # hashed n-gram space; collisions are negligible at this size


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_CHAR_WB = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 5)).build_analyzer()


def analyze_text(text: str) -> list[str]:
    """The terms of a text: ``char_wb`` 3–5-grams, plus single characters and pairs inside runs
    of Chinese, Japanese or Korean script, where words are one or two characters long ("我养的猫"
    and "用户养了一只猫" share no 3-gram, but share 养 and 猫)."""
    terms: list[str] = _CHAR_WB(text)
    for run in _CJK_RUN.findall(text):
        terms.extend("\x01" + ch for ch in run)
        terms.extend("\x01" + run[i : i + 2] for i in range(len(run) - 1))
    return terms


class _Analyzer:
    """:func:`analyze_text` terms, hashed; per-text results cached (LRU)."""

    def __init__(self, max_texts: int = 100_000) -> None:
        self._vectorizer = HashingVectorizer(
            analyzer=analyze_text,
            alternate_sign=False,
            norm=None,
            n_features=_N_FEATURES,
            dtype=np.float64,
        )
        self._cache: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._max_texts = max_texts
        self._lock = threading.Lock()

    def transform(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(feature ids, sublinear tf) per text; only texts not seen before are analysed."""
        results: list[tuple[np.ndarray, np.ndarray] | None] = []
        todo: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                else:
                    todo.setdefault(text, []).append(i)
                results.append(hit)
        if todo:
            fresh = list(todo)
            matrix = self._vectorizer.transform(fresh).tocsr()
            matrix.sort_indices()
            computed: list[tuple[np.ndarray, np.ndarray]] = []
            for row in range(len(fresh)):
                lo, hi = matrix.indptr[row], matrix.indptr[row + 1]
                ids = matrix.indices[lo:hi].astype(np.int64)
                tf = 1.0 + np.log(matrix.data[lo:hi])  # sublinear tf, as sklearn's
                computed.append((ids, tf))
            with self._lock:
                for text, value in zip(fresh, computed, strict=True):
                    for i in todo[text]:
                        results[i] = value
                    self._cache[text] = value
                while len(self._cache) > self._max_texts:
                    self._cache.popitem(last=False)
        return results  # type: ignore[return-value]


_ANALYZER = _Analyzer()


def hashed_counts(texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text its hashed :func:`analyze_text` terms (sorted ids) and their counts: what a
    derived snapshot stores, so a cold read builds the index without analysing any text."""
    if not texts:
        return []
    matrix = _ANALYZER._vectorizer.transform(list(texts)).tocsr()
    matrix.sort_indices()
    rows = []
    for row in range(len(texts)):
        lo, hi = matrix.indptr[row], matrix.indptr[row + 1]
        rows.append((matrix.indices[lo:hi].astype(np.int64), matrix.data[lo:hi].copy()))
    return rows


class CharNgramIndex:
    """TF-IDF (smooth idf, sublinear tf, L2 rows) over hashed :func:`analyze_text` terms.

    For text without CJK characters, the same weighting as scikit-learn's
    ``TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True)``, built from
    cached per-text terms, stored column-major so a query reads only its own terms' columns.
    """

    def __init__(self, texts: Sequence[str], analyzer: _Analyzer | None = None) -> None:
        self._analyzer = analyzer or _ANALYZER
        self._build(self._analyzer.transform(texts) if texts else [])

    @classmethod
    def from_rows(
        cls, rows: Sequence[tuple[np.ndarray, np.ndarray]], analyzer: _Analyzer | None = None
    ) -> CharNgramIndex:
        """An index of texts analysed elsewhere: (hashed ids, sublinear tf) per text."""
        index = cls.__new__(cls)
        index._analyzer = analyzer or _ANALYZER
        index._build(rows)
        return index

    @classmethod
    def from_csc(
        cls,
        size: int,
        vocab: np.ndarray,
        colptr: np.ndarray,
        rows: np.ndarray,
        weights: np.ndarray,
        analyzer: _Analyzer | None = None,
    ) -> CharNgramIndex:
        """The index as a derived snapshot stores it (:meth:`arrays`): ``size`` texts, per
        column of ``vocab`` (sorted hashed ids) the rows holding it and their unit-row
        weights. Nothing is analysed, remapped or converted: a 5,000-fact memory opens in
        about a millisecond."""
        index = cls.__new__(cls)
        index._analyzer = analyzer or _ANALYZER
        index.size = size
        index._rows = None
        index._centroid = None
        index._norms = None
        index._vocab = np.asarray(vocab, dtype=np.int64)
        df = np.diff(np.asarray(colptr, dtype=np.int64)).astype(np.float64)
        index._idf = np.log((1.0 + size) / (1.0 + df)) + 1.0
        if not len(rows):
            index._matrix = None
            return index
        index._matrix = sparse.csc_matrix(
            (weights, np.asarray(rows, dtype=np.int32), np.asarray(colptr, dtype=np.int32)),
            shape=(size, len(index._vocab)),
        )
        return index

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(vocab, colptr, rows, weights, norms): what :meth:`from_csc` takes, and each row's
        norm before it was scaled to unit length (from which its counts come back)."""
        if self._matrix is None:
            empty = np.zeros(0)
            return (
                self._vocab,
                np.zeros(len(self._vocab) + 1, np.int64),
                empty,
                empty,
                np.zeros(self.size),
            )
        matrix = self._matrix
        norms = self._norms if self._norms is not None else np.ones(self.size)
        return self._vocab, matrix.indptr, matrix.indices, matrix.data, norms

    def _build(self, rows: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        self.size = len(rows)
        self._rows = None  # row-major copy of the matrix, built on first use
        self._centroid: np.ndarray | None = None
        self._norms: np.ndarray | None = None
        lengths = np.fromiter((len(ids) for ids, _ in rows), dtype=np.int64, count=len(rows))
        if not rows or not lengths.sum():
            self._vocab = np.zeros(0, dtype=np.int64)
            self._idf = np.zeros(0)
            self._matrix: Any = None
            return
        ids = np.concatenate([r[0] for r in rows])
        tf = np.concatenate([r[1] for r in rows])
        # compact the hashed ids to the columns in use; a lookup table is ~20× faster than
        # np.unique's sort on the ~150 n-grams × facts of a large memory
        present = np.zeros(_N_FEATURES, dtype=bool)
        present[ids] = True
        self._vocab = np.flatnonzero(present)
        remap = np.empty(_N_FEATURES, dtype=np.int32)
        remap[self._vocab] = np.arange(len(self._vocab), dtype=np.int32)
        columns = remap[ids]
        df = np.bincount(columns, minlength=len(self._vocab))
        self._idf = np.log((1.0 + self.size) / (1.0 + df)) + 1.0
        self._finish(tf, columns, lengths)

    def _finish(self, tf: np.ndarray, columns: np.ndarray, lengths: np.ndarray) -> None:
        """TF-IDF weights, unit rows, stored column-major."""
        indptr = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        weights = tf * self._idf[columns]
        row_of = np.repeat(np.arange(self.size), lengths)
        norms = np.sqrt(np.bincount(row_of, weights=weights * weights, minlength=self.size))
        norms[norms == 0] = 1.0
        self._norms = norms
        weights /= norms[row_of]
        csr = sparse.csr_matrix((weights, columns, indptr), shape=(self.size, len(self._vocab)))
        self._matrix = csr.tocsc()

    def _row_major(self) -> Any:
        if self._rows is None:
            self._rows = self._matrix.tocsr()
        return self._rows

    def centroid_similarity(self) -> np.ndarray:
        """Per text, the dot product of its (unit) TF-IDF row with the mean row: how generic it
        is within this index. O(non-zeros), computed once."""
        if self._matrix is None:
            return np.zeros(self.size)
        if self._centroid is None:
            mean = np.asarray(self._matrix.mean(axis=0)).ravel()
            self._centroid = np.asarray(self._matrix @ mean, dtype=np.float64).ravel()
        return self._centroid

    def row_similarity(self, positions: Sequence[int]) -> np.ndarray:
        """Cosine similarities between the indexed texts at ``positions`` (in that order), from
        the stored rows: nothing is analysed again, and only their non-zeros are touched."""
        n = len(positions)
        if self._matrix is None or n == 0:
            return np.zeros((n, n))
        rows = self._row_major()[np.asarray(positions, dtype=np.int64)]
        return np.asarray((rows @ rows.T).toarray(), dtype=np.float64)

    def pairwise(self, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarities between ``texts`` (weighted with this index's idf; terms the
        index does not know are left out). For a handful of picks, not the whole memory."""
        n = len(texts)
        out = np.zeros((n, n))
        if self._matrix is None or n == 0:
            return out
        rows = []
        for ids, tf in self._analyzer.transform(list(texts)):
            positions = np.minimum(np.searchsorted(self._vocab, ids), len(self._vocab) - 1)
            known = self._vocab[positions] == ids
            weights = np.zeros(len(self._vocab))
            np.add.at(weights, positions[known], tf[known] * self._idf[positions[known]])
            norm = math.sqrt(float(weights @ weights))
            rows.append(weights / norm if norm > 0 else weights)
        matrix = np.vstack(rows)
        return matrix @ matrix.T

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of ``query`` to every text, in [0, 1]."""
        if self._matrix is None or not query.strip():
            return np.zeros(self.size)
        ids, tf = self._analyzer.transform([query])[0]
        positions = np.searchsorted(self._vocab, ids)
        positions = np.minimum(positions, len(self._vocab) - 1)
        known = self._vocab[positions] == ids
        if not known.any():
            return np.zeros(self.size)
        columns = positions[known]
        weights = tf[known] * self._idf[columns]
        weights /= math.sqrt(float(weights @ weights))
        return np.asarray(self._matrix[:, columns] @ weights).ravel()


class WordTfidfIndex:
    """The seed's index: scikit-learn ``TfidfVectorizer()`` defaults (word tokens)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        self._vectorizer: TfidfVectorizer | None = None
        self._matrix: Any = None
        if texts:
            vectorizer = TfidfVectorizer()
            try:
                self._matrix = vectorizer.fit_transform(texts).tocsr()
                self._vectorizer = vectorizer
            except ValueError:  # empty vocabulary
                self._matrix = None

    def scores(self, query: str) -> np.ndarray:
        if self._vectorizer is None or not query.strip():
            return np.zeros(self.size)
        vector = self._vectorizer.transform([query])
        return np.asarray((self._matrix @ vector.T).todense()).ravel()
