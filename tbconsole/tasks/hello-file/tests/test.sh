#!/bin/bash
# Reward 1 iff /app/greeting.txt is exactly "Hello, Terminal-Bench!\n".
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

F=/app/greeting.txt
TEXT='Hello, Terminal-Bench!'

[ -f "$F" ] || fail "$F does not exist"
printf '%s\n' "$TEXT" | cmp -s - "$F" \
  || fail "wrong content in $F: '$(head -c 100 "$F" | cat -A | head -3 | tr '\n' ' ')' (expected '$TEXT\$')"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
