#!/bin/bash
# Reward 1 iff /app/report.sh is executable, has a bash shebang, an unchanged body,
# and prints the same report as running the original body with bash.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same body as environment/setup.sh ---
cat > "$OUT/body.sh" <<'SH'
# Prints a small inventory report (uses bash arrays, so /bin/sh will not do).
items=(apples pears plums)
counts=(3 5 8)
total=0
for i in "${!items[@]}"; do
  printf '%-6s %2d\n' "${items[$i]}" "${counts[$i]}"
  total=$((total + counts[i]))
done
echo "total $total"
SH
# -----------------------------------------
F=/app/report.sh
[ -f "$F" ] || fail "$F is missing"
[ -x "$F" ] || fail "$F is not executable"
head -1 "$F" | grep -Eq '^#! ?(/usr)?/bin/(bash|env bash)[[:space:]]*$'   || fail "first line is not a bash shebang: '$(head -1 "$F")'"
tail -n +2 "$F" | cmp -s - "$OUT/body.sh" || fail "lines after the shebang were changed"
want=$(bash "$OUT/body.sh")
got=$(cd /tmp && timeout 5 "$F" 2>&1) || fail "running $F failed: $got"
[ "$got" = "$want" ] || fail "unexpected output from $F: $got"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
