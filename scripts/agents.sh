#!/usr/bin/env bash
# Make .agents/ ready: the agent CLIs pinned in scripts/agents.lock (Claude Code, Codex CLI),
# installed from npm, so Harbor's claude-code and codex agents run in the local sandbox offline.
# Safe to run again: it does nothing when nothing changed. It never fails the caller: where npm
# is missing or the install fails it prints one line and exits 0 (the tests that run these CLIs
# then fail with that reason; everything else works). TBCONSOLE_AGENTS=0 skips it.
set -uo pipefail
cd "$(dirname "$0")/.."

dest=${TBCONSOLE_AGENTS_DIR:-.agents}
lock=scripts/agents.lock
stamp=$dest/.tbconsole-installed
specs=$(grep -v '^\s*\(#\|$\)' "$lock" | tr -s ' \n' ' ')
specs=${specs% }
want=$(printf '%s' "$specs" | sha256sum | cut -d' ' -f1)

[ "${TBCONSOLE_AGENTS:-1}" = 0 ] && exit 0
installed() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
  && [ -x "$dest/node_modules/.bin/claude" ] && [ -x "$dest/node_modules/.bin/codex" ]; }
installed && exit 0

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "agents: npm/node not found, so Claude Code and Codex CLI are not installed in $dest/ (their tests will fail; everything else works). Install Node.js >= 20 with npm, then run scripts/agents.sh." >&2
  exit 0
fi

exec 9<"$lock"
flock 9 2>/dev/null  # one install at a time (make demo and make test may start together)
installed && exit 0
rm -rf "$dest".new.*  # an interrupted install's leftovers (nobody else installs now)

echo "agents: installing $specs into $dest/ with npm (native binaries, about 800 MB)"
mkdir -p "$(dirname "$dest")"
if ! tmp=$(mktemp -d "$dest.new.XXXXXX") || ! log=$(mktemp "${TMPDIR:-/tmp}/tbconsole-agents.XXXXXX.log"); then
  echo "agents: cannot create a folder beside $dest/, so Claude Code and Codex CLI are not installed (their tests will fail; everything else works)." >&2
  exit 0
fi
chmod 755 "$tmp"
start=$SECONDS
# shellcheck disable=SC2086  # one npm spec per word
if (cd "$tmp" && echo '{"private": true}' > package.json \
      && npm install --save-exact --no-audit --no-fund --no-update-notifier --loglevel=error $specs) >"$log" 2>&1 \
    && [ -x "$tmp/node_modules/.bin/claude" ] && [ -x "$tmp/node_modules/.bin/codex" ] \
    && "$tmp/node_modules/.bin/claude" --version >>"$log" 2>&1 \
    && "$tmp/node_modules/.bin/codex" --version >>"$log" 2>&1; then
  rm -rf "$dest"
  mv "$tmp" "$dest"
  echo "$want" > "$stamp"
  rm -f "$log"
  echo "agents: $("$dest/node_modules/.bin/claude" --version 2>/dev/null), $("$dest/node_modules/.bin/codex" --version 2>/dev/null) in $dest/ ($(du -sh "$dest" | cut -f1), $((SECONDS - start)) s)"
else
  reason=$(grep -m1 -i 'err' "$log" || tail -n1 "$log")
  rm -rf "$tmp"
  echo "agents: could not install $specs with npm (${reason:-no output}; full log: $log), so their tests will fail; everything else works. Run scripts/agents.sh again once the npm registry is reachable." >&2
fi
exit 0
