#!/bin/bash
# Reward 1 iff /app/notes holds exactly the expected names with their original contents.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

cd /app/notes 2>/dev/null || fail "/app/notes is missing"
# "<name now>|<name it had in setup>"
expected=(
  "todo.md|todo.txt"
  "ideas.md|ideas.txt"
  "meeting notes.md|meeting notes.txt"
  "README.md|README.md"
  "data.csv|data.csv"
  "archive.txt.bak|archive.txt.bak"
  "old/draft.txt|old/draft.txt"
  "old/log.md|old/log.md"
)
for pair in "${expected[@]}"; do
  now=${pair%%|*}; orig=${pair#*|}
  [ -f "$now" ] || fail "expected file /app/notes/$now is missing"
  [ "$(cat -- "$now")" = "content of $orig" ] || fail "/app/notes/$now has wrong content"
done
actual=$(find . -type f | sort)
want=$(for pair in "${expected[@]}"; do echo "./${pair%%|*}"; done | sort)
[ "$actual" = "$want" ] || fail "unexpected set of files: $(echo $actual)"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
