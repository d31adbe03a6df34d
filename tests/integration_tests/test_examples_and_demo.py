"""The README's promises, run as a newcomer would: `deermem demo`, the examples, a wheel install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

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


def test_deermem_demo_json(tmp_path: Path) -> None:
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
    if report["profile"] or report["facts"]:  # memory was written: it must reach thread 2
        assert report["injected"] is True, seen
        assert report["injected_block"].startswith("<memory>"), seen
        assert report["not_injected"] == ""
    else:  # the 135M model wrote nothing this run (it happens): the demo must say so
        assert report["injected"] is False, seen
        assert "the model wrote no memory from thread 1" in report["not_injected"], seen
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
    wrote_nothing = "(no summary fields were written)" in done.stdout and "Facts (0)" in done.stdout
    if wrote_nothing:  # the 135M model wrote nothing this run: the demo says so
        assert "nothing was injected: the model wrote no memory" in done.stdout, seen
    else:
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
