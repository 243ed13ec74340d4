#!/usr/bin/env bash
# Make .venv ready: a Python >= 3.12 virtual environment with the locked dependencies and
# tbconsole installed editable; then the agent CLIs in .agents/ (scripts/agents.sh). Safe to run
# again: it does nothing when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
stamp=$venv/.tbconsole-installed
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)

python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; }

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.12 python3.13 python3; do
    [ -n "$candidate" ] && command -v "$candidate" >/dev/null && python_ok "$candidate" && { command -v "$candidate"; return; }
  done
  local root
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in "$root"/versions/3.12*/bin/python3 "$root"/versions/3.13*/bin/python3; do
    [ -x "$candidate" ] && python_ok "$candidate" && { echo "$candidate"; return; }
  done
  return 1
}

# The browser test (tests/entry/test_web.py) drives the system Chromium: Debian's, installed when we can.
ensure_chromium() {
  command -v chromium >/dev/null && return
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing chromium (for the browser test)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 && return
  fi
  echo "chromium is missing, so the browser test will fail: install it as root with 'apt-get install chromium'" >&2
}

ensure_chromium

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && python_ok "$venv/bin/python"; then
  exec scripts/agents.sh
fi

if ! python_ok "$venv/bin/python" 2>/dev/null; then
  python=$(find_python) || {
    echo "tbconsole needs Python 3.12 or newer (Harbor requires it). Install one (e.g. 'pyenv install 3.12') or set PYTHON=/path/to/python3.12." >&2
    exit 2
  }
  echo "creating $venv with $python"
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi

echo "installing locked dependencies into $venv (first time: a few minutes, torch is large)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.lock
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
echo "$want" > "$stamp"
exec scripts/agents.sh
