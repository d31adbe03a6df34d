"""What every verb shares: usage errors, argument types, opening a private engine, the
compare-and-set write, tables."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from deermem_middleware.memory.document import Fact, Memory
    from deermem_middleware.runtime.service import MemoryService
    from deermem_middleware.storage.base import MemoryScope


__all__: list[str] = []  # private: the command is the interface


_FORMATTER = argparse.RawDescriptionHelpFormatter


EXIT_USAGE: Final = 2
"""Exit status for bad input: unknown ids, unreadable files, bad config (as argparse uses)."""


EXIT_DECLINED: Final = 1
"""Exit status when the person answers no to a confirmation prompt: nothing was changed."""


class UsageError(Exception):
    """Something the person typed or pointed at is wrong; reported as one line, exit 2."""


def _confidence_arg(text: str) -> float:
    from deermem_middleware.memory.manual import checked_confidence

    try:
        return checked_confidence(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None


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
        help="YAML config naming the storage (default: $DEERMEM_CONFIG, else "
        "$DEER_FLOW_CONFIG_PATH, else config.yaml in the project root; without any, the "
        "defaults: JSON files under ~/.deermem)",
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


def _categories() -> tuple[str, ...]:
    from deermem_middleware.memory.document import FACT_CATEGORIES

    return FACT_CATEGORIES


def _middleware(args: argparse.Namespace) -> MemoryService:
    """A private engine on the config's storage, with capture and journal replay off (see
    module): no scheduler is started, and agents' engines are not touched."""
    from pydantic import ValidationError

    from deermem_middleware.runtime.tool import tool_config, tool_engine
    from deermem_middleware.storage.base import MemoryScope

    user = getattr(args, "user", None)
    if user is not None:
        try:
            MemoryScope(user)  # "" would name every user's folder, and "default" via scope()
        except ValueError as exc:
            raise UsageError(f"--user: {exc}") from None
    agent = getattr(args, "agent", None)
    try:
        config = tool_config(args.config, agent)
    except ValidationError as exc:  # only the in-code default config: file errors are ConfigError
        raise UsageError(f"--agent: {exc.errors()[0]['msg']}") from None
    args.memory_enabled = config.enabled  # the tool's own copy has memory off (see module)
    try:
        return tool_engine(config, agent)
    except (ImportError, ValueError) as exc:  # a missing extra, a bad $DEERMEM_EMBEDDINGS
        raise UsageError(str(exc)) from None


@contextlib.contextmanager
def _opened(args: argparse.Namespace) -> Iterator[MemoryService]:
    """A private engine for one command, closed after it; an unreachable database is one line
    (:func:`_unreachable`)."""
    if not getattr(args, "verbose", 0):
        # the pool logs every failed reconnect (a WARNING each): they would bury that line
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    middleware = _middleware(args)
    try:
        yield middleware
    except Exception as exc:
        _unreachable(middleware, exc)
        raise
    finally:
        middleware.close(timeout=5.0)


def _unreachable(middleware: MemoryService, exc: Exception) -> None:
    """A database that stopped answering while the command ran (or was never reached: opened
    with ``setup: false``) is one line naming it — never its DSN, which may hold a password —
    instead of the driver's traceback; any other error is left alone."""
    from deermem_middleware.storage.factory import unreachable
    from deermem_middleware.storage.outage import StorageUnavailable, is_outage

    config = middleware.config
    if config.storage.backend != "postgres" or isinstance(exc, StorageUnavailable):
        return
    if is_outage(exc):
        message = unreachable(config.storage.dsn or "", config.storage_timeout_seconds, exc)
        raise StorageUnavailable(message) from None


def _now() -> str:
    from deermem_middleware.memory.document import utc_now_iso

    return utc_now_iso()


def _find_fact(memory: Memory, fact_id: str, scope: MemoryScope) -> Fact:
    from deermem_middleware.memory.manual import UnknownFactError, find_fact

    try:
        return find_fact(memory, fact_id)
    except UnknownFactError:
        raise UsageError(_no_fact(fact_id, scope)) from None


def _no_fact(fact_id: str, scope: MemoryScope) -> str:
    return (
        f"no fact {fact_id!r} in the memory of user {scope.user_id!r} / agent "
        f"{scope.agent_name!r} (see `deermem show --all`)"
    )


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


def _checked_text(text: str) -> str:
    from deermem_middleware.memory.manual import InvalidFactError, checked_text

    try:
        return checked_text(text)
    except InvalidFactError as exc:
        raise UsageError(str(exc)) from None


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


@contextlib.contextmanager
def _storage_guard(middleware: MemoryService) -> Iterator[None]:
    """A storage path that cannot be used (a file where a folder should be, no permission)
    becomes one clear line instead of a traceback."""
    try:
        yield
    except OSError as exc:
        root = middleware.location()
        culprit = next((p for p in [Path(root), *Path(root).parents] if p.is_file()), None)
        if isinstance(exc, NotADirectoryError) and culprit is not None:
            raise UsageError(
                f"the memory storage_path {root} is not a folder: {culprit} is a file (DeerFlow "
                "v2.0.0's storage_path named memory.json; name the folder that holds it)"
            ) from None
        raise UsageError(
            f"cannot use the memory storage at {root}: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename else "")
        ) from None
