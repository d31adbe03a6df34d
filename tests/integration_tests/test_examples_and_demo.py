"""The README's promises, run as a newcomer would: `deermem demo`, the examples, a wheel install."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.integration_tests.conftest import require_local_llm

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _offline_env(**extra: str) -> dict[str, str]:
    """The environment of a user without OpenAI credentials: the embedded default is used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(extra)
    return env


def _tails(done: subprocess.CompletedProcess[str]) -> str:
    """The end of a run's stdout and stderr, for an assertion's message."""
    return f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"


_COMMON = frozenset(
    [
        "user",
        "users",
        "about",
        "with",
        "from",
        "that",
        "this",
        "their",
        "they",
        "them",
        "have",
        "your",
        "what",
        "which",
        "would",
        "into",
        "main",
        "keep",
        "show",
        "short",
        "answers",
        "please",
        "month",
    ]
)


def said_in_thread_1(fact: str) -> bool:
    """Whether ``fact`` is something the demo's user said in thread 1 — checked here on its own
    terms, not by the product's grounding gate: every capitalised name in it is a word of the
    script, and it shares at least two distinctive words with the script."""
    from deermem_middleware.cli.demo import SCRIPT

    script = " ".join(SCRIPT)
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", script)}
    names = re.findall(r"(?<![.!?] )(?<!^)\b[A-Z][A-Za-z]+", fact)
    if any(n.lower() not in words for n in names if n != "User"):
        return False
    shared = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", fact)} & words - _COMMON
    return len(shared) >= 2


def check_demo_report(report: dict[str, Any]) -> list[str]:
    """What is wrong with one ``deermem demo --json`` report (empty: the demo showed memory
    working): a fact the user said in thread 1 was stored and is in thread 2's ``<memory>``."""
    problems = []
    said = [f["content"] for f in report["facts"] if said_in_thread_1(f["content"])]
    if not said:
        problems.append(f"no stored fact is something the user said: {report['facts']}")
    block = report.get("injected_block") or ""
    if not block.startswith("<memory>"):
        problems.append(f"thread 2 got no memory block: {report.get('not_injected')}")
    elif said and not any(fact in block for fact in said):
        problems.append(f"none of {said} is in thread 2's block:\n{block}")
    if any(item.get("cut") for item in report["extractions"]):
        problems.append(f"an extraction was cut at the output limit: {report['extractions']}")
    return problems


def test_the_demo_check_tells_said_from_invented() -> None:
    assert said_in_thread_1("User is Maya, a backend engineer at a fintech startup in Lyon.")
    assert said_in_thread_1("User migrates the payments service from MySQL to PostgreSQL")
    assert not said_in_thread_1("User is a freelance writer who uses PayPal")
    assert not said_in_thread_1("Lyon")
    assert not said_in_thread_1("User is a data engineer in Berlin.")


def test_deermem_demo_json(tmp_path: Path) -> None:
    """The README's demo on the bundled model: a fact the user said in thread 1 is stored and
    shown in thread 2, and no extraction is cut (CI also runs it 5 times in a row:
    ``.ci/demo.py``)."""
    require_local_llm()
    done = subprocess.run(
        [str(BIN / "deermem"), "demo", "--json", "--storage-path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=_offline_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert {"llm", "extraction_calls", "facts", "injected", "memory_path"} <= set(report)
    assert "llama.cpp" in report["llm"]
    assert report["extraction_calls"] >= 1
    seen = _tails(done)
    assert check_demo_report(report) == [], seen
    assert report["injected"] is True and report["not_injected"] == "", seen
    assert Path(report["memory_path"]).is_file()
    assert Path(report["memory_path"]).is_relative_to(tmp_path)
    for item in report["extractions"]:
        assert item["method"] == "json_schema"
        assert item["seconds"] > 0 and item["input_tokens"] > 0
    # progress went to stderr while the model ran; stdout is only the JSON object
    assert "assistant is answering" in done.stderr


def test_deermem_demo_text_prints_profile_facts_and_block(tmp_path: Path) -> None:
    require_local_llm()
    done = subprocess.run(
        [str(BIN / "deermem"), "demo", "--storage-path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=_offline_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = _tails(done)
    for heading in ("=== Memory file ===", "Profile:", "Facts (", "=== Injected"):
        assert heading in done.stdout, seen
    assert "Facts (0)" not in done.stdout, seen
    assert "<memory>" in done.stdout, seen
    assert "proves the wiring, not memory quality" in done.stdout


@pytest.mark.parametrize("example", ["create_agent_memory.py", "stategraph_memory.py"])
def test_llm_examples_run_as_written(example: str, local_llm: object) -> None:
    """The examples talk to whatever OpenAI-compatible endpoint OPENAI_BASE_URL names — here the
    local server (the same code path as OpenAI, vLLM or Ollama)."""
    base_url = local_llm.base_url  # type: ignore[attr-defined]
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT / "examples",
        env=_offline_env(
            OPENAI_BASE_URL=base_url, OPENAI_API_KEY="not-needed", DEERMEM_DEMO_MODEL="smollm2"
        ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Stored facts" in done.stdout
    assert "Traceback" not in done.stderr


def test_yaml_example_runs_as_written() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "yaml_agents.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "researcher: memory on, top_k=10" in done.stdout
    assert "reviewer: memory off" in done.stdout


def test_wheel_install_loads_prompts_from_the_wheel(tmp_path: Path) -> None:
    """`pip install .` (not editable) into a fresh venv: extraction and its prompts come from the
    installed wheel, not from the source tree."""
    wheels = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("deermem_middleware-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "deermem_middleware/prompts/extraction_system.md" in names
    assert "deermem_middleware/prompts/extraction_input.md" in names
    for page in ("index.html", "app.js", "app.css", "login.html"):  # the console needs no build
        assert f"deermem_middleware/console/static/{page}" in names

    fresh = tmp_path / "fresh-venv"
    venv.EnvBuilder(with_pip=True).create(fresh)
    python = fresh / "bin" / "python"
    # dependencies come from this environment (offline); the package itself from the wheel
    site = next(p for p in sys.path if p.endswith("site-packages"))
    (next((fresh / "lib").glob("python*/site-packages")) / "deps.pth").write_text(site + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "import deermem_middleware, pathlib, json\n"
        "from datetime import datetime, UTC\n"
        "from deermem_middleware.extraction.extractor import render_extraction_messages\n"
        "from deermem_middleware.memory.conversation import Turn\n"
        "from deermem_middleware.memory.document import Memory\n"
        "msgs = render_extraction_messages(Memory(), [Turn('user','I use Go','a'),"
        " Turn('assistant','ok','b')], now=datetime.now(UTC), json_instructions=True)\n"
        "print(json.dumps({'file': deermem_middleware.__file__, 'system': msgs[0].content[:40],"
        " 'has_schema': 'MemoryUpdate' in msgs[1].content}))\n"
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert str(fresh) in result["file"]  # imported from the fresh venv, not the source tree
    assert result["system"].startswith("You maintain the long-term memory")
    assert result["has_schema"] is True
