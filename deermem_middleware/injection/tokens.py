"""Offline token counting.

Counting must never touch the network (upstream, a tiktoken download once blocked an event loop
for 26 minutes). The default is a character estimate: ~4 characters per token for alphabetic
scripts and one token per CJK/kana/hangul character, which tracks cl100k within ~15 % on English
and errs on the high side for CJK — good enough for a budget. ``tiktoken`` is used only when it is
installed *and* its encoding file is already in the local cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

__all__ = ["TokenCounter", "char_token_count", "make_token_counter"]

logger = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]

_WIDE_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x9FFF),  # CJK radicals .. unified ideographs, kana, CJK punctuation
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # full-width forms
    (0x20000, 0x2FA1F),  # CJK extensions
)


def _is_wide(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _WIDE_RANGES)


def char_token_count(text: str) -> int:
    """Estimated tokens of ``text`` without any tokenizer file."""
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    wide = sum(1 for char in text if _is_wide(char))
    narrow = len(text) - wide
    return wide + (narrow + 3) // 4


_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _tiktoken_cached() -> bool:
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    folder = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()) / "data-gym-cache"
    return (folder / hashlib.sha1(_CL100K_URL.encode()).hexdigest()).is_file()


@lru_cache(maxsize=2)
def make_token_counter(mode: str = "char") -> TokenCounter:
    """A counter for ``mode`` ("char" or "tiktoken"); tiktoken falls back to "char" offline."""
    if mode == "tiktoken":
        try:
            import tiktoken  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            logger.info(
                "token_counting=tiktoken but tiktoken is not installed; using char estimate"
            )
            return char_token_count
        if not _tiktoken_cached():
            logger.info(
                "tiktoken encoding is not cached locally; using char estimate (no download)"
            )
            return char_token_count
        encoding = tiktoken.get_encoding("cl100k_base")
        return lambda text: len(encoding.encode(text, disallowed_special=()))
    if mode != "char":
        raise ValueError(f"unknown token counting mode {mode!r} (use 'char' or 'tiktoken')")
    return char_token_count
