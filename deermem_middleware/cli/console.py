"""``deermem console``: the memory console (page and API) on loopback, with a one-time login link.

It opens the config's storage the way every ``deermem`` verb does (a private engine, capture
off), so it can run beside the agents' processes. Binding to anything but loopback needs
``--allow-remote`` and prints a warning: the console shows and changes every user's memory, and
serves plain HTTP — put it behind TLS (a reverse proxy) before it leaves the machine.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from pathlib import Path

from deermem_middleware.cli.common import UsageError, _middleware

__all__: list[str] = []  # private: the command is the interface


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _add_operator(args: argparse.Namespace) -> int:
    from deermem_middleware.console.operators import add_operator

    if args.operators is None:
        raise UsageError("--add-operator needs --operators FILE (the file to add the operator to)")
    token, operator = add_operator(Path(args.operators), args.add_operator, args.role, args.users)
    print(f"added operator {operator.name!r} ({operator.role}) to {args.operators}")
    print(f"token (shown once; the file keeps only its SHA-256): {token}")
    return 0


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio then sets TCP_NODELAY on each accepted connection; without it
    # every response waited ~40 ms for the client's delayed ACK (benchmarks/console_api.py)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _console(args: argparse.Namespace) -> int:
    if args.add_operator is not None:
        return _add_operator(args)
    try:
        import uvicorn

        from deermem_middleware.console import ConsoleAuth, Operator, create_console_app
    except ImportError as exc:
        raise UsageError(
            f"the console needs the console extra ({exc.name} is missing): "
            'pip install "deermem-middleware[console]"'
        ) from None
    from deermem_middleware.console.operators import load_operators

    if not _is_loopback(args.host):
        if not args.allow_remote:
            raise UsageError(
                f"--host {args.host} is not a loopback address: the console would show and "
                "change every user's memory to the network over plain HTTP. Pass --allow-remote "
                "to do it anyway (behind TLS)"
            )
        print(
            f"deermem: warning: serving the memory console on {args.host}, beyond this "
            "machine, over plain HTTP: put TLS in front of it",
            file=sys.stderr,
        )
    auth = ConsoleAuth()
    if args.operators is not None:
        for digest, operator in load_operators(Path(args.operators)):
            auth.tokens[digest] = operator
    if args.login_as is not None and args.operators is not None:
        known = [o for o in auth.operators if o.name == args.login_as]
        if not known:
            raise UsageError(f"--login-as: no operator {args.login_as!r} in {args.operators}")
        link_for = known[0]
    else:
        name = args.login_as or os.environ.get("USER") or "admin"
        link_for = Operator(name, args.role)
    service = _middleware(args)
    try:
        app = create_console_app(service, auth=auth)
        sock = _listen(args.host, args.port)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}/"
        print(f"memory console on {base} (storage: {service.location()})")
        print(
            f"one-time login link for {link_for.name!r} ({link_for.role}, valid 15 minutes): "
            f"{base}login?token={auth.issue_link(link_for)}",
            flush=True,
        )
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()
    finally:
        service.close(timeout=5.0)
    return 0
