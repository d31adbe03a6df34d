"""``deermem demo``: a real ``create_agent`` agent with memory, end to end, on a real LLM.

Thread 1 is a scripted conversation in which a user says who they are, what they work on and a
preference; the memory is flushed (extracted by the LLM and stored); thread 2 asks a question, and
the demo shows what the model received in its system prompt.

The LLM is OpenAI (or any OpenAI-compatible endpoint) when ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``
are set, otherwise the embedded default: a local llama.cpp server with the bundled
SmolLM2-135M-Instruct, started and stopped by the demo. That tiny model proves the *wiring* —
real HTTP, real structured output, real storage and injection — not memory *quality*.

Nothing here is special to the demo: the bundled model gets what any extraction model limited to
1,024 output tokens gets (the compact schema and prompt of
:mod:`~deermem_middleware.extraction.json_schema`), and its facts pass the same wording and
write gates. Measured on 2 shared cores (5 runs in a row): thread 1's extraction takes about
3.6 s and 310 output tokens, the fact it stores ("User is migrating the user's payments service
from MySQL to PostgreSQL.") reaches thread 2's prompt, and the whole demo takes 10–11 s. It used
to take 26–133 s, hit the 1,024-token limit in both extractions and store no fact.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from deermem_middleware.testing import SystemPromptRecorder

__all__ = ["SCRIPT", "DemoReport", "run_demo"]

SCRIPT = (
    "Hi! I'm Maya, a backend engineer at a fintech startup in Lyon.",
    "This month I'm migrating our payments service from MySQL to PostgreSQL.",
    "Please keep answers short and show code in Go, it's my main language.",
)
QUESTION = "Which tool would you suggest for my database migration?"
USER_ID = "maya"


@dataclass
class DemoReport:
    llm: str
    memory_path: str
    selection: str = ""
    """Which selection channel was on: semantic + lexical, or lexical only and why."""
    extraction_calls: int = 0
    extractions: list[dict[str, Any]] = field(default_factory=list)
    profile: dict[str, str] = field(default_factory=dict)
    facts: list[dict[str, Any]] = field(default_factory=list)
    injected: bool = False
    injected_block: str = ""
    not_injected: str = ""
    """Why thread 2's prompt got no ``<memory>`` block ("" when it got one)."""
    answer: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@contextlib.contextmanager
def _progress(out: TextIO, label: str) -> Iterator[None]:
    """A ticking "label ... 12s" line on ``out`` while a slow step runs."""
    stop = threading.Event()
    started = time.monotonic()
    interactive = out.isatty()

    def tick() -> None:
        while not stop.wait(1.0 if interactive else 10.0):
            elapsed = time.monotonic() - started
            if interactive:
                out.write(f"\r  {label} ... {elapsed:.0f}s")
            else:
                out.write(f"  {label} ... still running ({elapsed:.0f}s)\n")
            out.flush()

    out.write(f"  {label} ...\n" if not interactive else f"  {label} ...")
    out.flush()
    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        elapsed = time.monotonic() - started
        out.write(
            f"\r  {label} ... done in {elapsed:.1f}s\n"
            if interactive
            else f"  {label}: done in {elapsed:.1f}s\n"
        )
        out.flush()


@contextlib.contextmanager
def _demo_models(out: TextIO) -> Iterator[tuple[Any, Any, str]]:
    """(extraction model, agent model, description): OpenAI when configured, else the bundled
    local model. The agent's answers are kept short; extraction gets room for its JSON."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from langchain_openai import ChatOpenAI

        name = os.environ.get("DEERMEM_DEMO_MODEL", "gpt-4o-mini")
        base = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        kwargs: dict[str, Any] = {"model": name, "temperature": 0, "timeout": 120}
        if not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = "not-needed"
        yield (
            ChatOpenAI(max_completion_tokens=1024, **kwargs),
            ChatOpenAI(max_completion_tokens=200, **kwargs),
            f"{name} at {base} (from OPENAI_* environment variables)",
        )
        return
    from deermem_middleware.extraction.local_llm import LocalLLMServer, bundled_gguf

    gguf = os.environ.get("DEERMEM_GGUF") or None
    server = LocalLLMServer(gguf=gguf)
    with _progress(out, "starting the local LLM server (llama.cpp)"):
        server.start()
    model_file = Path(gguf) if gguf else bundled_gguf()
    try:
        yield (
            server.chat_model(max_tokens=1024),
            server.chat_model(max_tokens=120),
            f"local llama.cpp server at {server.base_url} serving {model_file.name} "
            "(offline default; the 135M model proves the wiring, not memory quality)",
        )
    finally:
        server.stop()


def run_demo(*, storage_path: str | None = None, out: TextIO = sys.stderr) -> DemoReport:
    """Play the scripted conversation and return what happened (progress goes to ``out``)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from deermem_middleware.config import MemoryConfig
    from deermem_middleware.memory.sections import SECTION_FIELDS
    from deermem_middleware.middleware import MemoryMiddleware

    started = time.monotonic()
    folder = storage_path or tempfile.mkdtemp(prefix="deermem-demo-")
    config = MemoryConfig(storage_path=folder, debounce_seconds=30.0, agent_name="demo")
    with _demo_models(out) as (model, agent_model, description):
        out.write(f"LLM: {description}\n")
        middleware = MemoryMiddleware(config, model=model)
        report = DemoReport(
            llm=description,
            memory_path=middleware.service.describe(middleware.scope(USER_ID)),
            selection=middleware.service.selection,
        )
        out.write(f"Fact selection: {report.selection}\n")

        def on_update(job: Any, outcome: Any) -> None:
            extraction = outcome.extraction
            if extraction is not None:
                report.extraction_calls += extraction.calls
                report.extractions.append(
                    {
                        "thread": job.thread_id,
                        "method": extraction.method,
                        "calls": extraction.calls,
                        "seconds": round(extraction.seconds, 2),
                        "input_tokens": extraction.input_tokens,
                        "output_tokens": extraction.output_tokens,
                        "rejected_items": len(extraction.rejected),
                        "cut": extraction.truncated,
                        "status": outcome.status,
                    }
                )

        middleware.add_update_listener(on_update)
        agent = create_agent(
            agent_model,
            [],
            system_prompt="You are a helpful assistant. Answer in at most two sentences.",
            middleware=[middleware],
            checkpointer=InMemorySaver(),
            name="demo",
        )
        thread_1: RunnableConfig = {
            "configurable": {"thread_id": "demo-thread-1", "user_id": USER_ID}
        }
        out.write("\nThread 1: the user introduces themselves\n")
        for index, text in enumerate(SCRIPT, 1):
            out.write(f"  user: {text}\n")
            with _progress(out, f"assistant is answering (turn {index}/{len(SCRIPT)})"):
                result = agent.invoke({"messages": [HumanMessage(text)]}, thread_1)
            out.write(f"  assistant: {_one_line(result['messages'][-1].content)}\n")

        with _progress(out, "extracting memory from thread 1 (flush)"):
            middleware.flush()
        memory = middleware.get_memory(USER_ID)
        report.profile = {
            name: memory.section(name).summary
            for name in SECTION_FIELDS
            if memory.section(name).summary
        }
        report.facts = [
            {"id": f.id, "category": f.category, "confidence": f.confidence, "content": f.content}
            for f in memory.facts
        ]

        out.write("\nThread 2: a new conversation\n")
        out.write(f"  user: {QUESTION}\n")
        recorder = SystemPromptRecorder()
        thread_2: RunnableConfig = {
            "configurable": {"thread_id": "demo-thread-2", "user_id": USER_ID},
            "callbacks": [recorder],
        }
        with _progress(out, "assistant is answering with memory injected"):
            result = agent.invoke({"messages": [HumanMessage(QUESTION)]}, thread_2)
        report.answer = _one_line(result["messages"][-1].content)
        out.write(f"  assistant: {report.answer}\n")
        system = recorder.systems[0] if recorder.systems else ""
        start, end = system.find("<memory>"), system.find("</memory>")
        if start >= 0 and end > start:
            report.injected = True
            report.injected_block = system[start : end + len("</memory>")]
        else:
            report.not_injected = _why_not_injected(report, system)
        with _progress(out, "updating memory from thread 2 and shutting down"):
            middleware.close(timeout=None)
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _why_not_injected(report: DemoReport, system: str) -> str:
    """Say why thread 2 got no memory: the tiny model wrote none (it answers every
    ``shouldUpdate`` false now and then), or something failed (the log above says what)."""
    if not system:
        return "no model call of thread 2 was recorded"
    if not report.profile and not report.facts:
        return (
            "the model wrote no memory from thread 1 that passed the write gates (the log above "
            "says why each proposal was not stored); try a larger model"
        )
    return "memory was stored but not injected: see the log above"


def _one_line(content: Any, limit: int = 300) -> str:
    text = " ".join(str(content).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_report(report: DemoReport, out: TextIO = sys.stdout) -> None:
    """The human-readable summary."""
    w = out.write
    w("\n=== Memory file ===\n")
    w(f"{report.memory_path}\n")
    w("\nProfile:\n")
    if report.profile:
        for name, summary in report.profile.items():
            w(f"  {name}: {summary}\n")
    else:
        w("  (no summary fields were written)\n")
    w(f"\nFacts ({len(report.facts)}):\n")
    for fact in report.facts:
        w(f"  - [{fact['category']} | {fact['confidence']:.2f}] {fact['content']}\n")
    if not report.facts:
        w("  (none above the confidence threshold)\n")
    w("\n=== Injected into thread 2's system prompt ===\n")
    w((report.injected_block or f"(nothing was injected: {report.not_injected})") + "\n")
    w("\n=== Extraction ===\n")
    w(f"calls: {report.extraction_calls}\n")
    for item in report.extractions:
        cut = " (cut at the model's output limit)" if item.get("cut") else ""
        w(
            f"  thread {item['thread']}: {item['method']}, {item['seconds']}s, "
            f"{item['input_tokens']} input + {item['output_tokens']} output tokens{cut}\n"
        )
    w(f"\nLLM: {report.llm}\nFact selection: {report.selection}\nTotal: {report.seconds}s\n")


def main_json(report: DemoReport, out: TextIO = sys.stdout) -> None:
    out.write(json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n")
