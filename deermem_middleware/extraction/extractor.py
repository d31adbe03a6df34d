"""LLM extraction: memory + new turns -> a validated
:class:`~deermem_middleware.memory.document.MemoryUpdate`.

Works with any LangChain ``BaseChatModel``:

1. **Structured output first** — ``with_structured_output(schema, method="json_schema")`` with a
   bounded schema (every list and string capped, so a small constrained model cannot loop until the
   token limit). OpenAI's strict mode rejects ``maxLength``; on such a 400 the same call is retried
   once without string caps, and whatever worked is remembered for the next extraction.
2. **Plain fallback** — when the model or endpoint cannot do structured output
   (``NotImplementedError``, a 400, a parse failure): a plain call with the schema in the prompt,
   then tolerant JSON parsing (code fences, prose around the object, ``<think>`` text, truncated
   output).
3. **Item-by-item validation** — each section, fact and removal is validated on its own; a bad item
   is dropped with a log line naming the field and why, and everything else applies. Only when
   nothing at all can be parsed does extraction fail (the memory is then left unchanged).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableSequence
from pydantic import ValidationError

from deermem_middleware.memory.conversation import Turn, message_text
from deermem_middleware.memory.document import (
    FACT_CATEGORIES,
    HISTORY_FIELDS,
    MAX_DATE_CHARS,
    MAX_FACT_CHARS,
    MAX_FACTS_PER_UPDATE,
    MAX_REMOVALS_PER_UPDATE,
    MAX_SUMMARY_CHARS,
    MAX_SUPERSEDES_PER_FACT,
    USER_FIELDS,
    Fact,
    HistoryUpdate,
    Memory,
    MemoryUpdate,
    NewFact,
    SectionUpdate,
    UserUpdate,
)
from deermem_middleware.memory.time import parse_timestamp

__all__ = [
    "MAX_LISTED_REJECTIONS",
    "ExtractionError",
    "ExtractionResult",
    "MemoryExtractor",
    "parse_json_text",
    "parse_update",
    "prompt_facts",
    "render_extraction_messages",
    "update_json_schema",
]

logger = logging.getLogger(__name__)

Method = Literal["json_schema", "json_fallback"]


class ExtractionError(RuntimeError):
    """The model's answer could not be turned into an update at all."""


@dataclass
class ExtractionResult:
    update: MemoryUpdate
    method: Method
    """``json_schema`` (structured output) or ``json_fallback`` (plain call, tolerant parsing)."""
    rejected: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    calls: int = 0


# ------------------------------------------------------------------------------------------------
# The JSON schema the model is asked to follow
# ------------------------------------------------------------------------------------------------


def _string(max_length: int, description: str, *, caps: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if caps:
        schema["maxLength"] = max_length
    return schema


def _section_schema(description: str, *, caps: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": {
            "shouldUpdate": {"type": "boolean"},
            "summary": _string(
                MAX_SUMMARY_CHARS, "The whole new summary, or empty when not updating.", caps=caps
            ),
        },
        "required": ["shouldUpdate", "summary"],
        "additionalProperties": False,
    }


_SECTION_DESCRIPTIONS = {
    "workContext": "Job, role, projects, tech stack.",
    "personalContext": "Who they are outside work.",
    "topOfMind": "What they are busy with right now.",
    "recentMonths": "What happened in the last few months.",
    "earlierContext": "Older, still relevant history.",
    "longTermBackground": "Stable background: education, career, values.",
}


def update_json_schema(
    *, string_caps: bool = True, fact_ids: Sequence[str] | None = None
) -> dict[str, Any]:
    """The JSON schema of :class:`MemoryUpdate` as sent to the model.

    Strict-mode compatible (every property required, no additional properties, no numeric ranges).
    ``string_caps`` adds ``maxLength`` to strings: grammar-constrained local servers need it,
    OpenAI's strict mode rejects it (lists keep ``maxItems`` either way). ``fact_ids``: the ids
    shown in the prompt; ``factsToRemove`` and each new fact's ``supersedes`` may then only name
    those (a constrained decoder cannot invent ids, and with no facts shown it cannot remove or
    replace anything).
    """
    ids = None if fact_ids is None else list(dict.fromkeys(fact_ids))

    def id_list(max_items: int, description: str) -> dict[str, Any]:
        item: dict[str, Any] = {"type": "string"}
        schema: dict[str, Any] = {
            "type": "array",
            "description": description,
            "maxItems": max_items,
        }
        if ids is not None:
            if ids:
                item["enum"] = ids
            else:
                schema["maxItems"] = 0
        schema["items"] = item
        return schema

    removals = id_list(
        MAX_REMOVALS_PER_UPDATE, "Ids of facts that were wrong or that the user asked to forget."
    )

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                n: _section_schema(_SECTION_DESCRIPTIONS[n], caps=string_caps) for n in names
            },
            "required": list(names),
            "additionalProperties": False,
        }

    return {
        "title": "MemoryUpdate",
        "description": "An update to the long-term memory about the user.",
        "type": "object",
        "properties": {
            "user": group(USER_FIELDS),
            "history": group(HISTORY_FIELDS),
            "newFacts": {
                "type": "array",
                "maxItems": MAX_FACTS_PER_UPDATE,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": _string(
                            MAX_FACT_CHARS, "One self-contained fact.", caps=string_caps
                        ),
                        "category": {"type": "string", "enum": list(FACT_CATEGORIES)},
                        "confidence": {"type": "number", "description": "From 0.0 to 1.0."},
                        "sourceKind": {
                            "type": "string",
                            "enum": ["stated", "inferred"],
                            "description": "stated: the user said it explicitly.",
                        },
                        "supersedes": id_list(
                            MAX_SUPERSEDES_PER_FACT,
                            "Ids of facts this one replaces because something changed.",
                        ),
                        "eventAt": _string(
                            MAX_DATE_CHARS,
                            "When the event happened or will happen, as an ISO date "
                            '(2026-05-07, 2026-05 or 2026); "" when not about an event in time.',
                            caps=string_caps,
                        ),
                        "validUntil": _string(
                            MAX_DATE_CHARS,
                            'Last day a short-lived fact holds, as an ISO date; "" otherwise.',
                            caps=string_caps,
                        ),
                    },
                    "required": [
                        "content",
                        "category",
                        "confidence",
                        "sourceKind",
                        "supersedes",
                        "eventAt",
                        "validUntil",
                    ],
                    "additionalProperties": False,
                },
            },
            "factsToRemove": removals,
        },
        "required": ["user", "history", "newFacts", "factsToRemove"],
        "additionalProperties": False,
    }


# ------------------------------------------------------------------------------------------------
# Tolerant parsing and item-by-item validation
# ------------------------------------------------------------------------------------------------

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|\Z)", re.DOTALL)
_OBJECT_START = re.compile(r'\{\s*["}]')
"""Where a JSON object can begin: ``{"`` or ``{}``. Prose braces (``{maybe}``) are not tried."""
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
"""A JSON string (possibly unterminated) or a bracket: strings are skipped whole, in C."""

_MAX_OBJECT_STARTS = 64
"""Object starts tried from each end of an answer. Each failed decode costs time proportional to
its offset, so trying every ``{`` of a hostile megabyte of braces took minutes."""
_MAX_PARTIAL_CHARS = 256_000
"""How much of a truncated answer is completed. A whole legitimate update is about 20,000
characters; anything past this is noise a small model produced until its token limit."""
_MAX_CUTS = 200
_MAX_DEPTH = 32
"""An update nests four levels deep; past this a prefix holds nothing usable (and the decoder
would give up near a thousand levels anyway)."""

_UPDATE_KEYS = frozenset({"user", "history", "newFacts", "factsToRemove"})


def _looks_like_update(value: Any) -> bool:
    return isinstance(value, dict) and not _UPDATE_KEYS.isdisjoint(value)


def _loads(text: str) -> Any:
    """``json.loads`` that fails with ``ValueError`` only: a deeply nested answer makes the
    decoder raise ``RecursionError``, which must count as "not JSON", not crash the worker."""
    try:
        return json.loads(text, strict=False)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _complete_items(text: str) -> dict[str, Any] | None:
    """The longest prefix of a truncated object that ends at a closing brace, completed.

    Cutting at a ``}`` keeps only items the model finished writing: a half-written fact or summary
    at the end of a truncated answer is dropped, not stored with made-up defaults. One linear scan
    finds the braces outside strings and what each prefix needs closed; a failed decode at offset
    ``p`` rules out every longer prefix too (it holds the same error), so few decodes are tried.
    """
    text = text[:_MAX_PARTIAL_CHARS]
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token == "{" or token == "[":
            stack.append("}" if token == "{" else "]")
            if len(stack) > _MAX_DEPTH:
                break  # garbage nested thousands deep: keep the complete items before it
        elif token == "}" or token == "]":
            if not stack or stack[-1] != token:
                break  # mismatched bracket: no longer prefix can parse
            stack.pop()
            if token == "}":
                cuts.append((match.end(), "".join(reversed(stack))))
            if not stack:
                break  # the object is closed: what follows is not part of it
    limit = len(text)
    for end, closers in reversed(cuts[-_MAX_CUTS:]):
        if end > limit:
            continue
        try:
            value = _loads(text[:end] + closers)
        except json.JSONDecodeError as exc:
            limit = min(limit, exc.pos)
            continue
        except ValueError:
            continue
        if _looks_like_update(value):
            return value
    return None


def _bounded(items: list[int], limit: int) -> list[int]:
    """The first and the last ``limit`` items (the answer is near one end of the text)."""
    if len(items) <= 2 * limit:
        return items
    return items[:limit] + items[-limit:]


def parse_json_text(text: str) -> Any:
    """The JSON object in a model's text answer, however it was wrapped.

    Tries, in order: the whole text; fenced blocks; the first decodable ``{...}`` that has update
    keys (an inner object of a truncated answer must not pass for the answer); a truncated object
    cut back to its last complete item. Raises :class:`ExtractionError` when none works. The work
    is bounded whatever the text (a megabyte of braces, brackets nested thousands deep).
    """
    cleaned = _THINK.sub("", text).strip()
    candidates = [cleaned]
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(cleaned))
    for candidate in candidates:
        try:
            return _loads(candidate)
        except ValueError:
            pass
    decoder = json.JSONDecoder(strict=False)
    starts = [m.start() for m in _OBJECT_START.finditer(cleaned)]
    for start in _bounded(starts, _MAX_OBJECT_STARTS):
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except (ValueError, RecursionError):
            continue
        if _looks_like_update(value):
            return value
    for start in starts[:5]:  # the answer starts early; bound the work
        value = _complete_items(cleaned[start:])
        if value is not None:
            logger.warning("extraction answer was truncated JSON; using the complete items only")
            return value
    preview = text[:120].replace("\n", " ")
    raise ExtractionError(f"no JSON object in the model's answer (starts with {preview!r})")


def _error_text(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
    )


MAX_LISTED_REJECTIONS = 50
"""Rejections named one by one per update; the rest are counted in one last entry, so an answer
with thousands of bad items cannot flood the log."""


def parse_update(data: Any) -> tuple[MemoryUpdate, list[str]]:
    """Validate each part of a raw answer on its own; return the update and the rejections.

    Rejections are also logged (warning), each naming the field and the reason; past
    :data:`MAX_LISTED_REJECTIONS` they are counted in one final ``more: ...`` entry.
    """
    if not isinstance(data, Mapping):
        raise ExtractionError(f"the model's answer is a {type(data).__name__}, not a JSON object")
    if not any(k in data for k in ("user", "history", "newFacts", "factsToRemove", *USER_FIELDS)):
        raise ExtractionError(
            "the model's answer has none of the update fields (user, history, newFacts, "
            f"factsToRemove); keys: {sorted(map(str, data))[:10]}"
        )
    rejected: list[str] = []
    unlisted = 0

    def reject(where: str, why: str) -> None:
        # a hostile answer can hold thousands of bad items: name the first ones, count the rest
        nonlocal unlisted
        if len(rejected) >= MAX_LISTED_REJECTIONS:
            unlisted += 1
            return
        rejected.append(f"{where}: {why}")
        logger.warning("memory update item rejected: %s: %s", where, why)

    groups: dict[str, dict[str, SectionUpdate]] = {"user": {}, "history": {}}
    for group, names in (("user", USER_FIELDS), ("history", HISTORY_FIELDS)):
        raw_group = data.get(group)
        if raw_group is not None and not isinstance(raw_group, Mapping):
            reject(group, f"expected an object, got {type(raw_group).__name__}")
            raw_group = None
        for name in names:
            raw = raw_group.get(name) if raw_group is not None else data.get(name)
            if raw is None:
                continue
            where = f"{group}.{name}"
            if not isinstance(raw, Mapping):
                reject(
                    where,
                    f"expected an object with shouldUpdate and summary, got {type(raw).__name__}",
                )
                continue
            try:
                groups[group][name] = SectionUpdate.model_validate(raw)
            except ValidationError as exc:
                reject(where, _error_text(exc))

    facts: list[NewFact] = []
    raw_facts = data.get("newFacts")
    if raw_facts is not None and not isinstance(raw_facts, list):
        reject("newFacts", f"expected a list, got {type(raw_facts).__name__}")
        raw_facts = None
    for index, raw in enumerate(raw_facts or []):
        where = f"newFacts[{index}]"
        if len(facts) >= MAX_FACTS_PER_UPDATE:
            reject(where, f"more than {MAX_FACTS_PER_UPDATE} new facts in one update")
            continue
        if not isinstance(raw, Mapping):
            reject(where, f"expected an object, got {type(raw).__name__}")
            continue
        try:
            facts.append(NewFact.model_validate(raw))
        except ValidationError as exc:
            reject(where, _error_text(exc))

    removals: list[str] = []
    raw_removals = data.get("factsToRemove")
    if raw_removals is not None and not isinstance(raw_removals, list):
        reject("factsToRemove", f"expected a list, got {type(raw_removals).__name__}")
        raw_removals = None
    for index, raw in enumerate(raw_removals or []):
        where = f"factsToRemove[{index}]"
        if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
            raw = raw["id"]
        if not isinstance(raw, str) or not raw.strip() or len(raw) > 80:
            reject(where, f"expected a fact id, got {str(raw)[:40]!r}")
            continue
        if len(removals) >= MAX_REMOVALS_PER_UPDATE:
            reject(where, f"more than {MAX_REMOVALS_PER_UPDATE} removals in one update")
            continue
        if raw.strip() not in removals:
            removals.append(raw.strip())

    if unlisted:
        why = f"{unlisted} further item(s) rejected, not listed one by one"
        rejected.append(f"more: {why}")
        logger.warning("memory update item rejected: more: %s", why)
    update = MemoryUpdate(
        user=UserUpdate(**groups["user"]),
        history=HistoryUpdate(**groups["history"]),
        newFacts=facts,
        factsToRemove=removals,
    )
    return update, rejected


# ------------------------------------------------------------------------------------------------
# Prompt
# ------------------------------------------------------------------------------------------------

_INVISIBLE = r"[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]*"


def _spelled(word: str) -> str:
    """``word`` in any case, in ASCII or fullwidth letters, with invisible characters anywhere
    inside: a model reads ``</conv\u200bersation>`` or a fullwidth ``＜/ｃｏｎｖ…＞`` as the tag."""
    chars = []
    for char in word:
        variants = {char, char.upper(), chr(ord(char) + 0xFEE0), chr(ord(char.upper()) + 0xFEE0)}
        chars.append("[" + "".join(sorted(re.escape(v) for v in variants)) + "]")
    return _INVISIBLE.join(chars)


_DATA_TAG = re.compile(
    rf"[<＜﹤]{_INVISIBLE}\s*[/／]?{_INVISIBLE}\s*"
    rf"(?:{_spelled('conversation')}|{_spelled('current_memory')})"
)


def _neutralise_tags(text: str) -> str:
    """Conversation text cannot close (or reopen) the data blocks it is placed in."""
    return _DATA_TAG.sub(lambda m: "&lt;" + m.group(0)[1:], text)


def prompt_facts(memory: Memory, turns: Sequence[Turn], max_facts: int) -> list[Fact]:
    """The facts shown to the extractor: the active ones, all of them or the ``max_facts`` most
    related to the new turns (those are the ones it may reinforce, replace or contradict).

    Superseded and archived facts are history: shown, the model would restate or re-add them. An
    archived fact the user states again is revived by the fact algebra without being shown.
    """
    facts = [f for f in memory.facts if f.status == "active"]
    if len(facts) <= max_facts:
        return facts
    from deermem_middleware.retrieval.selector import (
        FactIndex,
        SelectionParams,
        SelectionQuery,
        rank,
        score_facts,
    )

    index = FactIndex(facts)
    query = SelectionQuery("\n".join(t.text for t in turns))
    scores = score_facts(index, query, SelectionParams())[0]
    return [facts[i] for i in rank(index, scores, max_facts)]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _memory_for_prompt(memory: Memory, facts: Sequence[Fact]) -> str:
    """The current memory as compact lines (about half the tokens of indented JSON)."""
    lines = [
        f"{group}.{name}: {_one_line(memory.section(name).summary)}"
        for group, names in (("user", USER_FIELDS), ("history", HISTORY_FIELDS))
        for name in names
        if memory.section(name).summary
    ]
    if facts:
        lines.append("facts (id | category | confidence | content):")
        lines.extend(
            f"- {f.id} | {f.category} | {f.confidence:.2f} | {_one_line(f.content)}" for f in facts
        )
    if not lines:
        return "(empty: nothing is known about this user yet)"
    return _neutralise_tags("\n".join(lines))


def _said_at(turn: Turn) -> str:
    """`` [2026-11-30 14:02 UTC]`` when the turn knows when it was said (relative dates in it
    resolve against this), else ""."""
    moment = parse_timestamp(turn.at)
    return f" [{moment.strftime('%Y-%m-%d %H:%M')} UTC]" if moment is not None else ""


def render_extraction_messages(
    memory: Memory,
    turns: Sequence[Turn],
    *,
    now: datetime,
    facts: Sequence[Fact] | None = None,
    max_prompt_facts: int = 80,
    json_instructions: bool = False,
    string_caps: bool = True,
) -> list[BaseMessage]:
    """System instructions + a human message holding the memory and the new turns as data.

    ``facts``: the facts to show (default: :func:`prompt_facts`).
    """
    from deermem_middleware.extraction.prompts import load_prompt, render_prompt

    if facts is None:
        facts = prompt_facts(memory, turns, max_prompt_facts)
    conversation = "\n\n".join(
        f"{'User' if t.role == 'user' else 'Assistant'}{_said_at(t)}: {_neutralise_tags(t.text)}"
        for t in turns
    )
    human = render_prompt(
        "extraction_input",
        now=now.astimezone(UTC).strftime("%Y-%m-%d"),
        current_memory=_memory_for_prompt(memory, facts),
        conversation=conversation,
    )
    if json_instructions:
        schema = json.dumps(
            update_json_schema(string_caps=string_caps, fact_ids=[f.id for f in facts]),
            separators=(",", ":"),
        )
        human += render_prompt("extraction_json_fallback", schema=schema)
    return [SystemMessage(load_prompt("extraction_system").strip()), HumanMessage(human)]


# ------------------------------------------------------------------------------------------------
# Calling the model
# ------------------------------------------------------------------------------------------------


def _is_http_rejection(exc: BaseException) -> bool:
    """Did the endpoint refuse the *request shape* (400/422), as opposed to failing transiently?"""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status in (400, 422) or type(exc).__name__ in (
        "BadRequestError",
        "UnprocessableEntityError",
    )


def _truncated_completion(exc: BaseException) -> tuple[str, int, int] | None:
    """(text, input tokens, output tokens) of an answer the OpenAI SDK refused to parse because
    it hit ``max_tokens`` — its complete items are still worth keeping."""
    completion = getattr(exc, "completion", None)
    if completion is None or type(exc).__name__ != "LengthFinishReasonError":
        return None
    try:
        text = completion.choices[0].message.content or ""
    except (AttributeError, IndexError):
        return None
    usage = getattr(completion, "usage", None)
    return (
        text,
        int(getattr(usage, "prompt_tokens", 0) or 0),
        int(getattr(usage, "completion_tokens", 0) or 0),
    )


def _log_unsupported(exc: BaseException) -> None:
    logger.info(
        "structured output unsupported by this model (%s: %s)", type(exc).__name__, str(exc)[:200]
    )


def _usage(message: Any) -> tuple[int, int]:
    usage = getattr(message, "usage_metadata", None) or {}
    return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)


def _is_openai(model: BaseChatModel) -> bool:
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return False
    return isinstance(model, BaseChatOpenAI)


def _default_string_caps(model: BaseChatModel) -> bool:
    """OpenAI's own endpoint rejects maxLength in strict mode; everything else gets caps first."""
    if not _is_openai(model):
        return True
    base_url = getattr(model, "openai_api_base", None)
    if not base_url:  # also set from OPENAI_BASE_URL by the SDK client itself
        client = getattr(model, "root_client", None)
        base_url = str(getattr(client, "base_url", "") or "")
    return bool(base_url) and "api.openai.com" not in base_url


class MemoryExtractor:
    """Turns (memory, new turns) into a validated update with one model (see module docstring).

    ``structured``: "auto" tries structured output and remembers if the model cannot do it;
    "never" always uses the plain JSON path; "always" never falls back.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        structured: Literal["auto", "always", "never"] = "auto",
        string_caps: bool | None = None,
        max_prompt_facts: int = 80,
        run_name: str = "deermem_memory_extraction",
    ) -> None:
        self.model = model
        self.structured = structured
        self._structured_ok = structured != "never"
        self.string_caps = _default_string_caps(model) if string_caps is None else string_caps
        self.max_prompt_facts = max_prompt_facts
        self.run_name = run_name

    def extract(
        self,
        memory: Memory,
        turns: Sequence[Turn],
        *,
        now: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ExtractionResult:
        """One extraction. Raises :class:`ExtractionError` (nothing usable) or the model's own
        transient errors (timeouts, rate limits, 5xx) for the caller to retry."""
        moment = now or datetime.now(UTC)
        started = time.perf_counter()
        config: RunnableConfig = {
            "run_name": self.run_name,
            "tags": ["deermem", "memory-extraction"],
            "metadata": dict(metadata or {}),
        }
        result = ExtractionResult(update=MemoryUpdate(), method="json_fallback")
        data: Any = None
        if self._structured_ok:
            data = self._structured(memory, turns, moment, config, result)
        if data is None:
            messages = render_extraction_messages(
                memory,
                turns,
                now=moment,
                max_prompt_facts=self.max_prompt_facts,
                json_instructions=True,
                string_caps=self.string_caps,
            )
            answer = self.model.invoke(messages, config=config)
            result.calls += 1
            tokens_in, tokens_out = _usage(answer)
            result.input_tokens += tokens_in
            result.output_tokens += tokens_out
            result.method = "json_fallback"
            data = parse_json_text(message_text(getattr(answer, "content", answer)))
        result.update, result.rejected = parse_update(data)
        result.seconds = time.perf_counter() - started
        return result

    def _structured(
        self,
        memory: Memory,
        turns: Sequence[Turn],
        now: datetime,
        config: RunnableConfig,
        result: ExtractionResult,
    ) -> Any:
        """Structured-output attempts; None means "use the plain path"."""
        facts = prompt_facts(memory, turns, self.max_prompt_facts)
        fact_ids = [f.id for f in facts]
        messages = render_extraction_messages(memory, turns, now=now, facts=facts)
        attempts = [self.string_caps] + ([False] if self.string_caps else [])
        for caps in attempts:
            kwargs: dict[str, Any] = {"method": "json_schema"}
            if _is_openai(self.model):
                kwargs["strict"] = True
            try:
                # raising here means the model has no structured output (fake models, older
                # integrations, an unsupported method); the same error at invoke time would
                # instead be a broken response, which must not switch structured output off
                runnable = self.model.with_structured_output(
                    update_json_schema(string_caps=caps, fact_ids=fact_ids), **kwargs
                )
            except (NotImplementedError, ValueError, TypeError) as exc:
                if self.structured == "always":
                    raise
                _log_unsupported(exc)
                break  # the model cannot do it at all; caps make no difference
            # Call the bound model directly and parse its raw answer ourselves: include_raw=True
            # runs a RunnableParallel on a thread pool, which cannot start at interpreter exit
            # (where the final flush runs), and we want the raw text for tolerant parsing anyway.
            bound = runnable.first if isinstance(runnable, RunnableSequence) else runnable
            try:
                output = bound.invoke(messages, config=config)
            except OutputParserException as exc:
                result.calls += 1
                logger.warning("structured output did not parse (%s); retrying plain", exc)
                return None
            except NotImplementedError as exc:
                if self.structured == "always":
                    raise
                _log_unsupported(exc)
                break
            except Exception as exc:
                truncated = _truncated_completion(exc)
                if truncated is not None:
                    text, tokens_in, tokens_out = truncated
                    result.calls += 1
                    result.input_tokens += tokens_in
                    result.output_tokens += tokens_out
                    result.method = "json_schema"
                    logger.warning(
                        "extraction answer hit the model's max_tokens (%d output tokens); keeping "
                        "its complete items",
                        tokens_out,
                    )
                    try:
                        return parse_json_text(text)
                    except ExtractionError:
                        return None
                if self.structured == "always" or not _is_http_rejection(exc):
                    raise  # timeouts, rate limits, 5xx: the caller retries later
                result.calls += 1  # the request reached the endpoint and was refused
                logger.info(
                    "structured output %s rejected by the endpoint (%s: %s)",
                    "with string caps" if caps else "without string caps",
                    type(exc).__name__,
                    str(exc)[:200],
                )
                continue
            result.calls += 1
            raw = output if isinstance(output, AIMessage) else None
            tokens_in, tokens_out = _usage(raw)
            result.input_tokens += tokens_in
            result.output_tokens += tokens_out
            if caps != self.string_caps:
                logger.info("structured output works without string caps; keeping that")
                self.string_caps = caps
            result.method = "json_schema"
            if raw is None:  # a runnable that already parsed (not a model binding)
                parsed = output.model_dump() if hasattr(output, "model_dump") else output
                if isinstance(parsed, Mapping):
                    return parsed
                text = ""
            else:
                parsed = raw.additional_kwargs.get("parsed")
                if isinstance(parsed, Mapping):
                    return parsed
                text = message_text(raw.content)
            if text:
                try:
                    return parse_json_text(text)
                except ExtractionError:
                    pass
            logger.warning("structured output did not parse; retrying with a plain JSON call")
            return None
        if self.structured == "auto":
            self._structured_ok = False
            logger.info(
                "structured output unavailable for this model; using plain JSON calls from now on"
            )
        return None
