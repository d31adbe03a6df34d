"""CI: the README's demo command, run as a newcomer runs it, several times in a row.

Each run is the README's demo command (``.ci/run`` passes its ``<!-- ci:demo -->`` block as
``--command``) with ``--json`` and a fresh storage folder, on the embedded default (no OpenAI
variables): it must store a fact the user said in thread 1 and show it in thread 2's
``<memory>`` block (the check of ``tests/integration_tests/test_examples_and_demo.py``), with no
extraction cut. One line per run: facts stored, seconds. Exit 1 on any failed run.

    python .ci/demo.py [--runs 5] [--command "deermem demo"]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration_tests.test_examples_and_demo import check_demo_report  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default="deermem demo", help="the README's demo command")
    args = parser.parse_args()
    command = shlex.split(args.command)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    failed = 0
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="deermem-ci-demo-") as folder:
            done = subprocess.run(
                [*command, "--json", "--storage-path", folder],
                capture_output=True,
                text=True,
                timeout=600,
                env=env,
                check=False,
            )
        if done.returncode != 0:
            print(f"demo run {run}: exited {done.returncode}\n{done.stderr[-3000:]}")
            failed += 1
            continue
        report = json.loads(done.stdout)
        problems = check_demo_report(report)
        facts = "; ".join(f["content"] for f in report["facts"])
        print(f"demo run {run}: {len(report['facts'])} fact(s), {report['seconds']} s: {facts}")
        for problem in problems:
            print(f"  FAIL {problem}")
        failed += bool(problems)
    print(f"demo: {args.runs - failed} of {args.runs} runs showed memory working")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
