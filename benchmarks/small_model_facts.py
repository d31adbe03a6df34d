"""What a small model proposes as facts, and what the write path stores: a recorded corpus.

The bundled SmolLM2-135M is what a newcomer's ``deermem demo`` runs on, and what invents most
("Alice is a freelance writer and uses PayPal …" from "I'm Alice. I write Go at a payments
company."). Its proposals over 60 varied conversations (written for this corpus: jobs, places,
family, pets, tools, preferences, small talk, requests, two in Chinese) were recorded once with
``--record`` and labelled by hand, each proposed fact as

- ``said``: the user said it (paraphrased or copied, in any person);
- ``invented``: it claims something the user did not say (a name, a job, a product, a count,
  an opinion the model made up) — wholly or in part;
- ``not_a_fact``: not a statement about the user at all (a question, the assistant's advice,
  a copy of the prompt, small talk).

Each proposal then goes through what the updater does with it (``memory.wording``, the value
gate, the grounding gate with its specifics check, the default confidence threshold), fact by
fact; "share only" is the grounding gate's share-of-terms rule alone on the words as the model
wrote them, the gate before it checked names, counts and occupations. Reported per label: the
share stored, and which step stopped the rest. ``--smoke`` (CI) evaluates the whole corpus (no
model is run); its floors hold that inventions stay out and what the user said gets in.

    python benchmarks/small_model_facts.py [--smoke] [--record] [--json-out PATH]

``--record`` (needs ``deermem local-llm install``) re-runs the bundled model over the corpus's
conversations and rewrites its proposals, keeping the label of every proposal recorded before
and marking new ones ``unlabelled`` (not counted until labelled).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from report import ROOT, Table, add_arguments, save

from deermem_middleware.extraction.json_schema import COMPACT, FULL, SchemaLimits
from deermem_middleware.memory.conversation import Turn
from deermem_middleware.memory.gates import gate_update
from deermem_middleware.memory.gates.grounding import (
    DEFAULT_MIN_SUPPORT,
    subject_words,
    support_for,
)
from deermem_middleware.memory.update import MemoryUpdate, NewFact
from deermem_middleware.memory.wording import reword_update

CORPUS = ROOT / "tests" / "fixtures" / "small_model_extractions.json"
LABELS = ("said", "invented", "not_a_fact")
THRESHOLD = 0.7
"""The default ``fact_confidence_threshold``: proposals below it are never stored."""
PROMPTS: dict[str, tuple[SchemaLimits, int]] = {"compact": (COMPACT, 1024), "full": (FULL, 1500)}
"""The prompt a recording used, with its caps and the model's ``max_tokens``."""


def _turns(texts: list[str]) -> tuple[Turn, ...]:
    return tuple(Turn("user", text, f"u{i}") for i, text in enumerate(texts))


def outcome(turns: tuple[Turn, ...], proposed: dict[str, Any], limits: SchemaLimits) -> str:
    """``stored``, ``stored_inferred`` or the step that stopped the proposal."""
    fact = NewFact(content=proposed["content"], confidence=proposed["confidence"])
    update = reword_update(
        MemoryUpdate(newFacts=[fact]), fact_cap=limits.fact_chars, summary_cap=None
    )
    if not update.newFacts:
        return "wording"
    gated, report = gate_update(update, turns)
    if report.value_rejected:
        return "value gate"
    if report.grounding_dropped:
        support = support_for(
            update.newFacts[0].content, [t.text for t in turns], subjects=subject_words()
        )
        return (
            "grounding: specifics" if support.score >= DEFAULT_MIN_SUPPORT else "grounding: share"
        )
    [kept] = gated.newFacts
    if kept.confidence < THRESHOLD:
        return "confidence"
    return "stored_inferred" if report.grounding_demoted else "stored"


def share_only(turns: tuple[Turn, ...], proposed: dict[str, Any]) -> bool:
    """The old rule: enough of the words, as the model wrote them, and the threshold."""
    support = support_for(proposed["content"], [t.text for t in turns], subjects=subject_words())
    return support.score >= DEFAULT_MIN_SUPPORT and proposed["confidence"] >= THRESHOLD


def evaluate(corpus: dict[str, Any]) -> dict[str, Any]:
    by_label: dict[str, Counter[str]] = {label: Counter() for label in LABELS}
    baseline: dict[str, int] = Counter()
    conversations_with_said = Counter[str]()
    unlabelled = 0
    for conversation in corpus["conversations"]:
        turns = _turns(conversation["turns"])
        for recording in conversation["recordings"]:
            limits = PROMPTS[recording["prompt"]][0]
            stored_said = False
            for proposed in recording["proposed"]:
                label = proposed.get("label", "unlabelled")
                if label not in LABELS:
                    unlabelled += 1
                    continue
                result = outcome(turns, proposed, limits)
                by_label[label][result] += 1
                baseline[label] += share_only(turns, proposed)
                stored_said |= label == "said" and result.startswith("stored")
            conversations_with_said[recording["prompt"]] += stored_said
    figures: dict[str, Any] = {}
    for label, counts in by_label.items():
        total = sum(counts.values())
        stored = counts["stored"] + counts["stored_inferred"]
        figures[label] = {
            "n": total,
            "stored": stored,
            "stored_pct": 100 * stored / total if total else 0.0,
            "share_only_stored": baseline[label],
            "share_only_pct": 100 * baseline[label] / total if total else 0.0,
            "steps": dict(counts),
        }
    recordings = Counter(r["prompt"] for c in corpus["conversations"] for r in c["recordings"])
    return {
        "model": corpus["model"],
        "recorded": corpus["recorded"],
        "conversations": len(corpus["conversations"]),
        "proposals": sum(f["n"] for f in figures.values()),
        "unlabelled": unlabelled,
        "labels": figures,
        "conversations_with_said_stored": {
            prompt: {
                "stored": conversations_with_said[prompt],
                "of": recordings[prompt],
                "pct": 100 * conversations_with_said[prompt] / recordings[prompt],
            }
            for prompt in recordings
        },
    }


def tables(results: dict[str, Any]) -> dict[str, Table]:
    names = {
        "said": "the user said it",
        "invented": "invented, wholly or in part",
        "not_a_fact": "not a fact about the user",
    }
    rows = []
    for label, name in names.items():
        f = results["labels"][label]
        rows.append(
            [
                name,
                f"{f['n']}",
                f"{f['share_only_stored']} ({f['share_only_pct']:.0f} %)",
                f"**{f['stored']} ({f['stored_pct']:.0f} %)**",
            ]
        )
    labels = Table(
        ["proposed fact", "proposals", "stored by the share rule alone", "stored now"], rows, "lrrr"
    )
    steps = sorted({s for f in results["labels"].values() for s in f["steps"]})
    step_rows = [
        [step, *(str(results["labels"][label]["steps"].get(step, 0)) for label in LABELS)]
        for step in steps
    ]
    by_step = Table(["outcome", *LABELS], step_rows, "l" + "r" * len(LABELS))
    return {"labels": labels, "steps": by_step}


def record(corpus: dict[str, Any], prompts: list[str]) -> dict[str, Any]:
    """Re-run the bundled model over the corpus's conversations (see the module docstring)."""
    from deermem_middleware.extraction.extractor import MemoryExtractor
    from deermem_middleware.extraction.local_llm import LocalLLMServer
    from deermem_middleware.memory.document import Memory

    now = datetime.now(UTC)
    with LocalLLMServer() as server:
        for prompt, (_, max_tokens) in PROMPTS.items():
            if prompt not in prompts:
                continue
            model = server.chat_model(max_tokens=max_tokens)
            for conversation in corpus["conversations"]:
                recordings = {r["prompt"]: r for r in conversation["recordings"]}
                if prompt not in recordings:
                    continue
                turns = _turns(conversation["turns"])
                result = MemoryExtractor(model).extract(Memory(), turns, now=now)
                assert result.as_written is not None
                labels = {p["content"]: p.get("label") for p in recordings[prompt]["proposed"]}
                proposed = []
                # a looping model repeats one fact; the fact algebra stores it once
                written = {f.content: f for f in result.as_written.newFacts}
                for fact in written.values():
                    label = labels.get(fact.content) or "unlabelled"
                    proposed.append(
                        {"content": fact.content, "confidence": fact.confidence, "label": label}
                    )
                recordings[prompt]["proposed"] = proposed
                print(conversation["id"], prompt, [p["content"][:60] for p in proposed])
    corpus["recorded"] = now.strftime("%Y-%m-%d")
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="re-run the bundled model")
    parser.add_argument(
        "--prompt", choices=list(PROMPTS), action="append", help="record only these (default: all)"
    )
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    if args.record:
        corpus = record(corpus, args.prompt or list(PROMPTS))
        args.corpus.write_text(
            json.dumps(corpus, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
    results = evaluate(corpus)
    made = tables(results)
    print(
        f"{results['model']}, recorded {results['recorded']}: {results['conversations']} "
        f"conversations, {results['proposals']} labelled proposals "
        f"({results['unlabelled']} unlabelled)"
    )
    for key, table in made.items():
        print(f"\n{key}:\n{table.markdown()}")
    save(__file__, args, results, made, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
