"""The form remembered text is screened in: one normalisation shared by the rules
(:mod:`~deermem_middleware.screen.assess` and its siblings) and the learned screen
(:mod:`~deermem_middleware.screen.learned`), so that both read "ig\u200bnore", "ＩＧＮＯＲＥ" and
"&#105;gnore" as "ignore" (pure; no I/O)."""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Final

__all__ = ["CJK", "latin_fold", "normalize_for_matching"]

# Cyrillic and Greek letters that render like Latin ones ("іgnоre" with Cyrillic і and о).
_LOOKALIKES: Final = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
        "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j",
        "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ɡ": "g", "ı": "i",
        "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
        "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w",
    }
)  # fmt: skip
# a form that holds Chinese (CJK) characters: the rules' Chinese tables run only on such forms
CJK: Final = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_APOSTROPHES: Final = str.maketrans({"’": "'", "‘": "'", "`": "'", "´": "'", "ʼ": "'"})
_SPACES: Final = re.compile(r"[^\S\n]+")


def _lines_of(text: str) -> list[str]:
    """Line ends of every kind (\\n, \\r, \\v, \\f, \\x1c-\\x1e, NEL, U+2028, U+2029) count:
    each of them starts a new line for a reader, so a role prefix after any of them is forged."""
    return text.splitlines() or [""]


def _clean_line(line: str) -> str:
    """Format characters (zero-width, direction marks, soft hyphens) and non-space controls are
    dropped — "ig\u200bnore" must read "ignore" — and every kind of space becomes one space."""
    kept = []
    for ch in line:
        category = unicodedata.category(ch)
        if category == "Cf" or (category == "Cc" and not ch.isspace()):
            continue
        kept.append(" " if ch.isspace() else ch)
    return _SPACES.sub(" ", "".join(kept)).strip()


def normalize_for_matching(text: str) -> str:
    """The form rules are matched against: NFKC, casefolded, without format or control
    characters, one line per line of the input, spaces collapsed, HTML entities decoded."""
    text = unicodedata.normalize("NFKC", html.unescape(text)).casefold()
    lines = (_clean_line(line) for line in _lines_of(text))
    return "\n".join(line for line in lines if line).translate(_APOSTROPHES)


def latin_fold(normalized: str) -> str:
    """Accents stripped and look-alike letters mapped, for the Latin-script rules."""
    decomposed = unicodedata.normalize("NFKD", normalized)
    stripped = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
    return stripped.translate(_LOOKALIKES)
