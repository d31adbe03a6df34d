"""The rule route: what an operator knows must always come back for a kind of message.

Relevance scoring answers "which facts look like this message?". Some recalls are known in
advance and do not look alike at all: a message about deploying ("ship it to prod", "帮我部署一下")
should bring the user's deployment preferences ("never deploy on Fridays", "uses blue-green
releases") whatever its words. ``recall_rules`` in the config says so directly:

.. code-block:: yaml

    recall_rules:
      - name: deployment
        match: "deploy|release|部署|上线"      # a regex, or a list of keywords
        categories: [preference]              # facts of these categories …
        topics: ["deploy", "release", "部署"]  # … that mention one of these (or all of the
                                              #     category when no topics are given)

When a rule's ``match`` finds the newest user message, the facts it names get ``rule_weight``
(default 1: above any relevance score) — they are recalled first, still within ``top_k`` and the
token budget, best relevance first among themselves. ``deermem explain`` and the injection
ledger name the rule that recalled each fact.

Pure: rules are compiled once when the config is read (a bad regex is a config error naming the
rule), and each fact list's masks are computed once per memory revision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from deermem_middleware.config.patterns import compile_pattern

__all__ = ["RecallRule", "compile_pattern", "rule_hits"]


@dataclass(frozen=True, slots=True)
class RecallRule:
    """One compiled ``recall_rules`` entry."""

    name: str
    match: re.Pattern[str]
    """Searched in the newest user message."""
    categories: frozenset[str] = frozenset()
    """Facts of these categories are recalled (all categories when empty)."""
    topics: re.Pattern[str] | None = None
    """Only the facts whose text this finds (all of the categories' facts when None)."""

    def applies(self, message: str) -> bool:
        return bool(message) and self.match.search(message) is not None

    def recalls(self, category: str, content: str) -> bool:
        """Whether a fact of ``category`` with text ``content`` is one this rule recalls."""
        if self.categories and category not in self.categories:
            return False
        return self.topics is None or self.topics.search(content) is not None

    def describe(self) -> str:
        """The rule in words, for ``deermem explain``."""
        what = f"{', '.join(sorted(self.categories))} facts" if self.categories else "facts"
        if self.topics is not None:
            what += f" mentioning /{self.topics.pattern}/"
        return f"{self.name}: /{self.match.pattern}/ → {what}"


def rule_hits(
    rules: Iterable[RecallRule],
    message: str,
    facts: Sequence[tuple[str, str]],
    masks: dict[RecallRule, np.ndarray],
) -> tuple[np.ndarray, list[str | None], list[RecallRule]]:
    """(mask of the facts recalled by a rule that applies to ``message``, per fact the first
    such rule's name, the rules that applied). ``facts`` are (category, content) pairs;
    ``masks`` caches each rule's mask for this fact list (filled here)."""
    n = len(facts)
    hit = np.zeros(n, dtype=bool)
    names: list[str | None] = [None] * n
    applied = [rule for rule in rules if rule.applies(message)]
    for rule in applied:
        mask = masks.get(rule)
        if mask is None:
            mask = np.array([rule.recalls(c, t) for c, t in facts], dtype=bool)
            masks[rule] = mask
        for position in np.flatnonzero(mask & ~hit):
            names[int(position)] = rule.name
        hit |= mask
    return hit, names, applied
