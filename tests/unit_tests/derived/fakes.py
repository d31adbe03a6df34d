"""Test doubles shared by the derived-snapshot tests: a deterministic embedding function, and a
screen and an embedder that record what they were asked."""

from __future__ import annotations

import hashlib

import numpy as np

from deermem_middleware.screen import TextAssessment, assess_memory_text

DIM = 16


def unit_vector(text: str) -> np.ndarray:
    """A fixed unit vector per text (seeded by the text's digest)."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(DIM)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def fake_embed(texts: list[str]) -> np.ndarray:
    """One :func:`unit_vector` per text."""
    return np.stack([unit_vector(t) for t in texts]) if texts else np.zeros((0, DIM))


class CountingScreen:
    """The real screen, recording each text it is asked about."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> TextAssessment:
        self.seen.append(text)
        return assess_memory_text(text)


class CountingEmbed:
    """:func:`fake_embed`, recording the texts of each call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return fake_embed(texts)

    @property
    def seen(self) -> list[str]:
        return [t for call in self.calls for t in call]
