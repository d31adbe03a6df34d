"""The derived snapshot of one memory revision, and its binary form (pure; no I/O).

What the read path needs about a stored memory and would otherwise compute from its text on
every cold read — per fact the instruction screen's verdict, the lexical channel's hashed
character n-grams, the entities the rules find, the embedding vector — is computed once when the
memory is written and stored beside the document, in the form below. A user's first model call
in a process (a restart, a new replica, a user the caches let go) then loads it instead of
re-deriving the whole memory: on 1,000 LoCoMo facts that re-derivation cost about 1.3–6.6 ms of
screening, 0.05 ms of n-gram analysis and 0.04 ms of entity rules per fact, and 20 ms per fact
to embed.

**Rows are keyed by the fact's text.** Each row carries the 64-bit digest of the text it was
derived from (:func:`text_digest`), so a snapshot stays usable for every fact whose text did not
change even when the document was written by something that does not derive (an older release,
a hand edit, a DeerFlow file): those facts are found by digest, the others are derived again.

**Compact.** Vectors are int8 with one float32 scale per row (384 + 4 bytes for
multilingual-e5-small; cosine error below 0.01, rankings unchanged on LoCoMo). The lexical rows
are the hashed n-gram ids as int32 indices into one sorted vocabulary per snapshot, with a uint8
count each. Verdicts are a sorted digest table (fact texts, categories, summaries and the
sentences of summaries that hold a directive) with a kind and a reason code.

**Binary form.** ``MAGIC``, a little-endian uint32 header length, a JSON header (what made each
part, the array table, the reasons), then the arrays, each 8-byte aligned. Decoding slices the
buffer (``numpy.frombuffer``): nothing is copied or parsed per fact, so a 5,000-fact snapshot
opens in well under a millisecond. A buffer that does not decode raises
:class:`SnapshotFormatError` naming what is wrong; callers treat it as no snapshot (everything is
derived again), never as a failed read.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from scipy import sparse

__all__ = [
    "COLUMN",
    "FACT_COLUMNS",
    "KINDS",
    "KIND_CODES",
    "MAGIC",
    "DerivedSnapshot",
    "MadeBy",
    "SnapshotFormatError",
    "decode_snapshot",
    "encode_snapshot",
    "text_digest",
    "text_digests",
]

MAGIC: Final = b"DEERMEM-DERIVED\x01"
KINDS: Final[tuple[str, ...]] = ("", "data", "directive", "injection")
"""Verdict kinds by code; code 0: no verdict stored."""
KIND_CODES: Final[dict[str, int]] = {kind: code for code, kind in enumerate(KINDS)}
FACT_COLUMNS: Final = (
    "confirmed",
    "used_at",
    "event_start",
    "event_end",
    "learnt",
    "confidence",
    "used",
    "injections",
    "thread",
    "category",
    "manual",
)
"""Per row, what selection reads of a fact's fields other than its text: epoch seconds of the
last confirmation (``last_confirmed``), of the last use (``last_used``), of the event's start
and end (``eventAt``) and of when it was learnt (``createdAt``) — NaN when unknown —; its
confidence, ``used`` and ``injections`` counts; the number of the conversation it was learnt in
(-1: none); its category (an index into the snapshot's ``categories``); 1 when it is manual.
Valid only for the revision the snapshot was written with (an exact read): otherwise they are
read from the facts again."""
COLUMN: Final[dict[str, int]] = {name: i for i, name in enumerate(FACT_COLUMNS)}

_SEPARATOR: Final = "\x1f"


class SnapshotFormatError(ValueError):
    """Bytes that are not a derived snapshot this release reads (the message says why)."""


def text_digest(text: str) -> int:
    """The 64-bit key of a text's derived rows (blake2b; a lone surrogate is kept as is)."""
    raw = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(raw, "little")


def text_digests(texts: list[str] | tuple[str, ...]) -> np.ndarray:
    """:func:`text_digest` of each text, as uint64 (about 0.35 µs a text)."""
    blake = hashlib.blake2b
    raw = b"".join(blake(t.encode("utf-8", "surrogatepass"), digest_size=8).digest() for t in texts)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64, copy=False)


@dataclass(frozen=True)
class MadeBy:
    """What made each part of a snapshot: a part made by something else than what runs now is
    re-derived in the background (and, for verdicts, not trusted meanwhile)."""

    screen: str = ""
    lexical: str = ""
    entities: str = ""
    embedding: str = ""
    """The embedding model (class, model name, address); "" when the snapshot has no vectors."""

    def as_dict(self) -> dict[str, str]:
        return {
            "screen": self.screen,
            "lexical": self.lexical,
            "entities": self.entities,
            "embedding": self.embedding,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MadeBy:
        return cls(
            **{k: str(data.get(k, "")) for k in ("screen", "lexical", "entities", "embedding")}
        )


@dataclass(frozen=True, eq=False)
class DerivedSnapshot:
    """Per fact row: its text's digest, its entities (``ent_text`` split at ``ent_offsets``,
    names separated by U+001F) and its vector (``vectors`` int8 rows × ``scales``; scale 0:
    none). ``lexical_rows``/``entity_rows``/``vector_rows`` say which rows carry that part
    (False: not derived yet).

    The lexical channel is stored as the revision's TF-IDF matrix, column-major, ready to
    score: per column (a hashed n-gram of ``lex_vocab``) how many rows hold it (``lex_df``),
    those rows (``lex_row``) and their unit-row weights (``lex_weight``, float16: scores agree
    with float64 to 1e-3), with each row's norm before scaling (``lex_norm``) — from which a
    row's n-gram counts are recovered when a later revision reuses it. The entity postings
    (``ent_names`` U+001F-separated, their rows at ``ent_ptr`` in ``ent_post``) index the
    revision's facts, the model-listed entities included. The verdict table covers every
    screened text, sorted by digest."""

    made_by: MadeBy
    digest: np.ndarray  # uint64[n]
    lex_vocab: np.ndarray  # int32[V], sorted hashed n-gram ids
    lex_df: np.ndarray  # uint16 or int32[V]: how many rows hold each column
    lex_row: np.ndarray  # uint16 or int32[nnz]
    lex_weight: np.ndarray  # float16[nnz]
    lex_norm: np.ndarray  # float32[n]
    lexical_rows: np.ndarray  # bool[n]
    ent_offsets: np.ndarray  # int64[n + 1]
    ent_text: bytes
    entity_rows: np.ndarray  # bool[n]
    ent_names: np.ndarray  # uint8[...]: the postings' names, U+001F-separated
    ent_ptr: np.ndarray  # int64[E + 1]
    ent_post: np.ndarray  # uint16 or int32[...]
    vectors: np.ndarray  # int8[n, d] (d = 0 without vectors)
    scales: np.ndarray  # float32[n]
    vector_rows: np.ndarray  # bool[n]: the vector was tried (scale 0 then: unusable)
    columns: np.ndarray | None  # float64[n, len(FACT_COLUMNS)]; None: absent
    verdict_digest: np.ndarray  # uint64[m], sorted
    verdict_kind: np.ndarray  # uint8[m]
    verdict_reason: np.ndarray  # uint16[m]
    reasons: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    """The category names the ``category`` column indexes."""
    _rows: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, init=False)

    @property
    def size(self) -> int:
        return len(self.digest)

    def row_of(self) -> dict[int, int]:
        """Digest → row (the first row with that text), built once per snapshot."""
        found = self._rows.get("row_of")
        if found is None:
            found = {}
            for row, key in enumerate(self.digest.tolist()):
                found.setdefault(key, row)
            self._rows["row_of"] = found
        return found

    def entities(self, row: int) -> tuple[str, ...]:
        """The entities of a row (empty when none, or not derived)."""
        lo, hi = int(self.ent_offsets[row]), int(self.ent_offsets[row + 1])
        if lo == hi:
            return ()
        return tuple(self.ent_text[lo:hi].decode("utf-8", "surrogatepass").split(_SEPARATOR))

    @property
    def lex_colptr(self) -> np.ndarray:
        """Where each column's rows start in ``lex_row`` (and end: the next one)."""
        found = self._rows.get("colptr")
        if found is None:
            found = np.zeros(len(self.lex_df) + 1, dtype=np.int64)
            np.cumsum(self.lex_df, out=found[1:])
            self._rows["colptr"] = found
        return found

    def idf(self) -> np.ndarray:
        """The smooth idf of each column, as the matrix was weighted."""
        df = np.asarray(self.lex_df, dtype=np.float64)
        return np.log((1.0 + self.size) / (1.0 + df)) + 1.0

    def lexical_row(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """(hashed n-gram ids, counts) of a row, recovered from its weights and norm: exact for
        the counts facts have (up to ~170 of one n-gram; float16 weights put a count of 300 off
        by one, which moves its tf by 0.3 %)."""
        csr = self._rows.get("csr")
        if csr is None:
            shape = (self.size, len(self.lex_vocab))
            weights = self.lex_weight.astype(np.float32)
            matrix = sparse.csc_matrix((weights, self.lex_row, self.lex_colptr), shape)
            csr = self._rows["csr"] = matrix.tocsr()
            csr.sort_indices()
            self._rows["idf"] = self.idf()
        lo, hi = int(csr.indptr[row]), int(csr.indptr[row + 1])
        columns = csr.indices[lo:hi]
        tf = csr.data[lo:hi].astype(np.float64) * float(self.lex_norm[row])
        tf /= self._rows["idf"][columns]
        counts = np.rint(np.exp(tf - 1.0))
        return self.lex_vocab[columns].astype(np.int64), np.maximum(counts, 1.0)

    def verdict(self, digest: int) -> tuple[str, str] | None:
        """(kind, reason) stored for the text with this digest, or None."""
        keys = self.verdict_digest
        at = int(np.searchsorted(keys, np.uint64(digest)))
        if at >= len(keys) or int(keys[at]) != digest:
            return None
        kind = KINDS[int(self.verdict_kind[at])]
        if not kind:
            return None
        code = int(self.verdict_reason[at])
        return kind, self.reasons[code] if code < len(self.reasons) else ""


def entity_blob(rows: list[tuple[str, ...]]) -> tuple[np.ndarray, bytes]:
    """(offsets, text) for per-row entity lists."""
    parts = [_SEPARATOR.join(r).encode("utf-8", "surrogatepass") for r in rows]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return offsets, b"".join(parts)


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit float rows → (int8 rows, float32 scales): each row scaled so its largest component
    is ±127, the scale chosen so that ``int8 row × scale`` has unit length again (a read then
    needs one multiplication, no normalisation). A zero row (no vector) gets scale 0."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    safe = np.where(peak > 0, peak, 1.0)[:, None]
    rows = np.clip(np.rint(vectors * (127.0 / safe)), -127, 127).astype(np.int8)
    norms = np.linalg.norm(rows.astype(np.float32), axis=1)
    scales = np.where((peak > 0) & (norms > 0), 1.0 / np.maximum(norms, 1e-12), 0.0)
    return rows, scales.astype(np.float32)


# -- binary form ---------------------------------------------------------------------------------

_ARRAYS: Final[tuple[tuple[str, str], ...]] = (
    ("digest", "<u8"),
    ("lex_vocab", "<i4"),
    ("lex_df", "<i4"),
    ("lex_row", "<i4"),
    ("lex_weight", "<f2"),
    ("lex_norm", "<f4"),
    ("lexical_rows", "|b1"),
    ("ent_offsets", "<i8"),
    ("entity_rows", "|b1"),
    ("ent_names", "|u1"),
    ("ent_ptr", "<i8"),
    ("ent_post", "<i4"),
    ("vectors", "|i1"),
    ("scales", "<f4"),
    ("vector_rows", "|b1"),
    ("columns", "<f8"),
    ("verdict_digest", "<u8"),
    ("verdict_kind", "|u1"),
    ("verdict_reason", "<u2"),
)


_OPTIONAL: Final = frozenset({"columns"})
"""Arrays a snapshot may lack (a part added after the first release of the format)."""
_ROW_INDICES: Final = frozenset({"lex_row", "ent_post", "lex_df"})
"""Arrays of row numbers (or counts of rows): stored as uint16 while the rows fit (most
memories), else int32."""


def _dtype_for(name: str, dtype: str, rows: int) -> str:
    return "<u2" if name in _ROW_INDICES and rows <= 0xFFFF else dtype


def encode_snapshot(snapshot: DerivedSnapshot) -> bytes:
    """The snapshot as bytes (see the module docstring)."""
    chunks: list[bytes] = []
    table: dict[str, list[Any]] = {}
    offset = 0
    for name, dtype in _ARRAYS:
        value = getattr(snapshot, name)
        if value is None:
            continue
        dtype = _dtype_for(name, dtype, snapshot.size)
        array = np.ascontiguousarray(value, dtype=np.dtype(dtype))
        raw = array.tobytes()
        table[name] = [dtype, list(array.shape), offset, len(raw)]
        chunks.append(raw + b"\0" * (-len(raw) % 8))
        offset += len(raw) + (-len(raw) % 8)
    table["ent_text"] = ["bytes", [len(snapshot.ent_text)], offset, len(snapshot.ent_text)]
    chunks.append(snapshot.ent_text)
    header = json.dumps(
        {
            "made_by": snapshot.made_by.as_dict(),
            "reasons": list(snapshot.reasons),
            "categories": list(snapshot.categories),
            "arrays": table,
        },
        separators=(",", ":"),
    ).encode("utf-8")
    header += b" " * (-(len(MAGIC) + 4 + len(header)) % 8)
    return b"".join([MAGIC, struct.pack("<I", len(header)), header, *chunks])


def decode_snapshot(data: bytes | bytearray | memoryview) -> DerivedSnapshot:
    """Bytes written by :func:`encode_snapshot` → the snapshot (arrays are read-only views)."""
    buffer = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    start = len(MAGIC) + 4
    if len(buffer) < start or bytes(buffer[: len(MAGIC)]) != MAGIC:
        raise SnapshotFormatError("not a derived snapshot (unknown header)")
    (length,) = struct.unpack("<I", bytes(buffer[len(MAGIC) : start]))
    if start + length > len(buffer):
        raise SnapshotFormatError("truncated header")
    try:
        header = json.loads(bytes(buffer[start : start + length]))
        table = header["arrays"]
        made_by = MadeBy.from_dict(header["made_by"])
        reasons = tuple(str(r) for r in header.get("reasons", ()))
        categories = tuple(str(c) for c in header.get("categories", ()))
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotFormatError(f"unreadable header ({type(exc).__name__})") from None
    body = start + length
    arrays: dict[str, Any] = {}
    try:
        for name, dtype in _ARRAYS:
            if name in _OPTIONAL and name not in table:
                arrays[name] = None  # written by a release that did not derive it
                continue
            declared, shape, offset, size = table[name]
            if name in _ROW_INDICES and declared == "<u2":
                dtype = declared
            if declared != dtype:
                raise SnapshotFormatError(f"{name}: dtype {declared}, expected {dtype}")
            lo = body + int(offset)
            if lo + int(size) > len(buffer):
                raise SnapshotFormatError(f"{name}: truncated")
            count = int(np.prod(shape)) if shape else 1
            arrays[name] = np.frombuffer(
                buffer, dtype=np.dtype(dtype), count=count, offset=lo
            ).reshape(shape)
        _, (text_size,), offset, _ = table["ent_text"]
        lo = body + int(offset)
        if lo + int(text_size) > len(buffer):
            raise SnapshotFormatError("ent_text: truncated")
        ent_text = bytes(buffer[lo : lo + int(text_size)])
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SnapshotFormatError):
            raise
        raise SnapshotFormatError(f"unreadable array table ({type(exc).__name__}: {exc})") from None
    snapshot = DerivedSnapshot(
        made_by=made_by, ent_text=ent_text, reasons=reasons, categories=categories, **arrays
    )
    _check(snapshot)
    return snapshot


def _check(s: DerivedSnapshot) -> None:
    """The shapes agree with each other (a snapshot that lies about its sizes is refused)."""
    n = s.size
    problems = []
    if s.ent_offsets.shape != (n + 1,) or s.lex_df.shape != s.lex_vocab.shape:
        problems.append("offsets do not match the rows")
    elif n and int(s.ent_offsets[-1]) != len(s.ent_text):
        problems.append("entity offsets run past their text")
    nnz = len(s.lex_row)
    if len(s.lex_weight) != nnz or int(np.sum(s.lex_df, dtype=np.int64)) != nnz:
        problems.append("lexical rows, weights and column pointers disagree")
    if nnz and (int(s.lex_row.min()) < 0 or int(s.lex_row.max()) >= n):
        problems.append("lexical rows outside the facts")
    if s.lex_norm.shape != (n,):
        problems.append("lexical norms do not match the rows")
    if len(s.ent_ptr) < 1 or int(s.ent_ptr[-1]) != len(s.ent_post):
        problems.append("entity postings disagree with their pointers")
    elif len(s.ent_post) and (int(s.ent_post.min()) < 0 or int(s.ent_post.max()) >= n):
        problems.append("entity postings outside the facts")
    flags = (s.lexical_rows, s.entity_rows, s.scales, s.vector_rows)
    if any(a.shape != (n,) for a in flags):
        problems.append("per-row flags do not match the rows")
    if s.columns is not None and s.columns.shape != (n, len(FACT_COLUMNS)):
        problems.append("fact columns do not match the rows")
    if s.vectors.ndim != 2 or s.vectors.shape[0] != n:
        problems.append("vectors do not match the rows")
    m = len(s.verdict_digest)
    if s.verdict_kind.shape != (m,) or s.verdict_reason.shape != (m,):
        problems.append("verdict table columns differ in length")
    if problems:
        raise SnapshotFormatError("; ".join(problems))
