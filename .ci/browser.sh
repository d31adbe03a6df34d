#!/usr/bin/env bash
# Headless Chromium for the console's browser tests: installs Debian's chromium when it is missing
# (CI runs as root) and prints the path. The tests drive it with Playwright's Python package (from
# the dev extra) through executable_path: Playwright's own browser downloads are never used.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Chromium (Debian package)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq chromium >&2
fi
command -v chromium
