#!/usr/bin/env bash
# CI: the version floors are true. Installs every runtime dependency at exactly the lowest version
# pyproject.toml allows (each ">=X" of `dependencies` and of the postgres/sqlite/embeddings extras
# pinned "==X" through a constraints file), on the lowest supported Python, and runs the unit tests
# and the storage conformance suite (SQLite and, with DEERMEM_TEST_DSN, PostgreSQL stores at their
# floors: forget must stay exact whatever prefix semantics the installed store has).
# Everything else (transitive dependencies, the test tools) resolves as it would for a user.
# A floor that cannot be installed (it contradicts another package's requirement, or has no
# wheel) fails the install; any failing or skipped test fails the job.
#
#   .ci/floors.sh             the floors of pyproject.toml
#   .ci/floors.sh --deerflow  the same, but the langchain family at DeerFlow's locked versions
#                             (langchain 1.3.14, langchain-core 1.4.9, langchain-openai 1.2.1,
#                             langgraph 1.2.5)
set -euo pipefail
cd "$(dirname "$0")/.."

# DeerFlow's lock file (HEAD f1f4af9): a DeerFlow environment must be able to install us
# (langchain 1.3.14 itself needs langgraph >= 1.2.5: the lowest a DeerFlow environment can have)
DEERFLOW_PINS="langchain==1.3.14 langchain-core==1.4.9 langchain-openai==1.2.1 langgraph==1.2.5"
overrides=""
if [ "${1:-}" = "--deerflow" ]; then
  overrides="$DEERFLOW_PINS"
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--deerflow]" >&2
  exit 2
fi

PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VENV=.venv-floors

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
echo "*" >"$VENV/.gitignore"  # keep the throwaway environment out of `git status`
py="$VENV/bin/python"
echo "== floors on $("$py" --version)${overrides:+, with $overrides} =="

# constraints: every ">=" floor as "==" (no extras: pip refuses extras in constraints);
# requirements: the package with its extras, plus the test tools named in the dev extra
"$py" - "$VENV/floors-constraints.txt" "$VENV/floors-requirements.txt" $overrides <<'EOF'
import re
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
runtime = (
    project["dependencies"]
    + extras["postgres"]
    + extras["sqlite"]
    + extras["embeddings"]
    + extras["console"]
)
requirement = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?$")
overrides = dict(pin.split("==") for pin in sys.argv[3:])
pins = []
for spec in runtime:
    name, _, versions, marker = requirement.match(spec).groups()
    floors = re.findall(r">=\s*([^,\s]+)", versions)
    if name in overrides:
        pins.append(f"{name}=={overrides.pop(name)}{marker or ''}")
    elif floors:
        pins.append(f"{name}=={floors[0]}{marker or ''}")
    elif "==" not in versions:
        sys.exit(f"floors: {spec!r} has no '>=' floor; give it one")
if overrides:
    sys.exit(f"floors: {sorted(overrides)} are not dependencies of the package")
test_tools = {"pytest", "pytest-asyncio", "hypothesis"}
tools = [spec for spec in extras["dev"] if requirement.match(spec)[1] in test_tools]
open(sys.argv[1], "w").write("\n".join(pins) + "\n")
open(sys.argv[2], "w").write("\n".join(["-e .[embeddings,postgres,sqlite,console]", *tools]) + "\n")
EOF
echo "== constraints =="
cat "$VENV/floors-constraints.txt"

echo "== install =="
start=$(date +%s)
"$py" -m pip install --quiet --disable-pip-version-check \
  -c "$VENV/floors-constraints.txt" -r "$VENV/floors-requirements.txt"
echo "== install took $(($(date +%s) - start))s =="
"$py" -m pip freeze | grep -i -E 'langchain|langgraph|pydantic' || true

# the unit tests are offline (their conftest refuses internet sockets)
unset OPENAI_API_KEY OPENAI_BASE_URL || true
echo "== unit tests and storage conformance on the floors =="
log="$VENV/pytest.log"
set +e
"$py" -m pytest tests/unit_tests tests/storage_spec -q -p no:cacheprovider 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# with -q the last line is the bare summary ("1654 passed in 48.77s"); without it, "=== ... ==="
summary="$(grep -E "^(=+ )?[0-9a-z].* in [0-9.]+s( \([0-9:]+\))?( =+)?$" "$log" | tail -n 1)" ||
  summary=""
if [ -z "$summary" ] || grep -q "no tests ran" "$log"; then
  echo "floors: no test was executed" >&2
  status=1
elif echo "$summary" | grep -q "skipped"; then
  echo "floors: tests were skipped: $summary" >&2
  status=1
fi
exit "$status"
