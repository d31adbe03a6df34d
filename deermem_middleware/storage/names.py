"""Ids as file and folder names: reversible, safe on every file system, short enough.

Apart from the JSON-file backend because its pending journal (one file per thread) and the Store
backend's labels name things the same way, and neither should import a backend to do it.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "HASHED_LABEL",
    "MAX_LABEL_CHARS",
    "MAX_NAME_BYTES",
    "decode_name",
    "encode_name",
    "file_name",
    "label",
    "shortened",
    "under",
    "unlabel",
]

_SAFE = re.compile(r"[A-Za-z0-9_\-.]")
_HEX = frozenset("0123456789abcdefABCDEF")


def encode_name(name: str) -> str:
    """A file-name-safe, reversible encoding of an id (``..`` and ``/`` cannot escape)."""
    out: list[str] = []
    for index, char in enumerate(name):
        if _SAFE.fullmatch(char) and not (index == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


MAX_NAME_BYTES = 150
"""Longest encoded id used as is; file systems cap a name at 255 bytes and we add suffixes."""


def file_name(name: str) -> str:
    """The file/folder name of an id: :func:`encode_name`, or for very long ids a readable
    prefix plus a hash (``~`` marks it; the document itself records the full id)."""
    return shortened(encode_name(name), name, MAX_NAME_BYTES)


def shortened(encoded: str, name: str, limit: int) -> str:
    """``encoded`` (an encoding of ``name``) if it has at most ``limit`` characters, else its
    first 100 characters (never splitting a ``%XX`` escape) plus ``~`` and a hash of ``name``."""
    if len(encoded) <= limit:
        return encoded
    prefix = encoded[:100]
    cut = prefix.rfind("%", len(prefix) - 2)  # never split a %XX escape
    if cut >= 0:
        prefix = prefix[:cut]
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=12).hexdigest()
    return f"{prefix}~{digest}"


def decode_name(encoded: str) -> str:
    raw = bytearray()
    index = 0
    while index < len(encoded):
        pair = encoded[index + 1 : index + 3]
        if encoded[index] == "%" and len(pair) == 2 and all(c in _HEX for c in pair):
            raw.append(int(pair, 16))
            index += 3
        else:
            raw.extend(encoded[index].encode("utf-8"))
            index += 1
    return raw.decode("utf-8", errors="replace")


MAX_LABEL_CHARS = 150
"""Longer labels become a readable prefix plus a hash. PostgreSQL indexes the namespace path in
a B-tree whose rows are limited to a few kB: a 10 kB user id could never be saved (``index row
requires 10056 bytes``), and every retry called the extraction model again. Four labels of at
most 150 characters keep the path far below the limit; the document records the full ids."""


def label(name: str) -> str:
    """A namespace label for an id: percent-encoded, dots included (the store's separator); a
    very long one is cut to a prefix plus a hash of the whole id (``~`` marks it), as the file
    backend names its files."""
    return shortened(encode_name(name).replace(".", "%2E") or "%00", name, MAX_LABEL_CHARS)


def unlabel(text: str) -> str | None:
    """The id a label stands for, or None for a hashed one (read the id from the value)."""
    if HASHED_LABEL.search(text):
        return None
    return decode_name(text)


HASHED_LABEL = re.compile(r"~[0-9a-f]{24}$")


def under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    """Whether ``namespace`` is ``prefix`` or below it, label by label and exactly.

    Every prefix search's results go through this: the store's own prefix semantics are not
    trusted. Before 3.1.1, langgraph-checkpoint-sqlite and -postgres matched prefixes with an
    unescaped ``LIKE '<path>%'`` (case-insensitive on SQLite), so a search under user ``bob``
    also returned ``bobby``'s and ``Bob``'s keys, and ``user_1``'s returned ``userX1``'s — a
    purge that deleted what the search returned deleted other users' memory."""
    return tuple(namespace[: len(prefix)]) == tuple(prefix)
