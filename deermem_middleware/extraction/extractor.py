"""LLM extraction: memory + new turns -> a validated
:class:`~deermem_middleware.memory.update.MemoryUpdate`.

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
4. **Rewording** — what was validated is reworded by rule (``memory.wording``: third person, no
   echoed labels, no mid-word cut), and ``ExtractionResult.as_written`` keeps the model's words.

The schema's caps and the prompt follow the model's output limit (``json_schema``: a model
allowed at most 1,024 tokens gets the compact shape), and an answer cut at that limit keeps its
complete items — facts first — with one WARNING that says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableSequence

from deermem_middleware.extraction.json_schema import (
    SchemaLimits,
    limits_for_output,
    update_json_schema,
)
from deermem_middleware.extraction.parsing import (
    MAX_LISTED_REJECTIONS,
    ExtractionError,
    parse_json_text,
    parse_update,
)
from deermem_middleware.extraction.prompt import prompt_facts, render_extraction_messages
from deermem_middleware.memory.conversation import Turn, message_text
from deermem_middleware.memory.document import Memory
from deermem_middleware.memory.sections import SECTION_FIELDS
from deermem_middleware.memory.update import MemoryUpdate
from deermem_middleware.memory.wording import reword_update

__all__ = [
    "MAX_LISTED_REJECTIONS",
    "ExtractionError",
    "ExtractionResult",
    "MemoryExtractor",
    "output_limit",
    "parse_json_text",
    "parse_update",
    "prompt_facts",
    "render_extraction_messages",
    "update_json_schema",
]

logger = logging.getLogger(__name__)

Method = Literal["json_schema", "json_fallback"]


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
    truncated: bool = False
    """The answer was cut at the model's output limit; only its complete items were kept."""
    as_written: MemoryUpdate | None = None
    """The update as the model wrote it, before :func:`~deermem_middleware.memory.wording.
    reword_update` (for benchmarks and debugging; ``update`` is what is applied)."""


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


def output_limit(model: BaseChatModel) -> int | None:
    """The most tokens ``model`` may answer with, as configured on it (None: not known)."""
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict"):
        value = getattr(model, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


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
        self.limits: SchemaLimits = limits_for_output(output_limit(model))
        """The schema's caps, sized to the model's output limit (see ``json_schema``)."""

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
                limits=self.limits,
            )
            answer = self.model.invoke(messages, config=config)
            result.calls += 1
            tokens_in, tokens_out = _usage(answer)
            result.input_tokens += tokens_in
            result.output_tokens += tokens_out
            result.method = "json_fallback"
            metadata = getattr(answer, "response_metadata", None) or {}
            result.truncated = metadata.get("finish_reason") == "length"
            data = parse_json_text(message_text(getattr(answer, "content", answer)))
        result.as_written, result.rejected = parse_update(data)
        caps = self.string_caps and result.method == "json_schema"
        result.update = reword_update(
            result.as_written,
            fact_cap=self.limits.fact_chars if caps else None,
            summary_cap=self.limits.summary_chars if caps else None,
        )
        if result.truncated:
            logger.warning(
                "extraction answer was cut at the model's output limit (%d tokens): kept the %d "
                "facts and %d summaries it completed; give the extraction model a higher "
                "max_tokens to keep the rest",
                output_limit(self.model) or result.output_tokens,
                len(result.update.newFacts),
                sum(result.update.section(n).shouldUpdate for n in SECTION_FIELDS),
            )
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
        messages = render_extraction_messages(
            memory, turns, now=now, facts=facts, limits=self.limits
        )
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
                    update_json_schema(string_caps=caps, fact_ids=fact_ids, limits=self.limits),
                    **kwargs,
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
                    result.truncated = True
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
