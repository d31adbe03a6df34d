"""The lines of an import's receipt, shared by ``deermem import FILE`` and ``--deerflow DIR``.

Apart from both commands so each can use them without importing the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from deermem_middleware.formats.interchange import CapReport

__all__: list[str] = []  # private: the commands are the interface

MAX_REPAIR_LINES: Final = 20
"""Repair and left-out lines a receipt shows without ``-v``."""


def _print_lines(lines: Sequence[str], verbose: int, indent: str = "  ") -> None:
    shown = lines if verbose else lines[:MAX_REPAIR_LINES]
    for line in shown:
        print(f"{indent}{line}")
    if len(lines) > len(shown):
        print(f"{indent}... and {len(lines) - len(shown)} more (-v lists them all)")


def _capped_note(capped: CapReport) -> str:
    notes = capped.notes()
    return f"; capped as extracted memory is: {'; '.join(notes)}" if notes else ""
