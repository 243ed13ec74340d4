#!/bin/bash
# Reward 1 iff /app/stats.py prints the right summary for the setup data and for
# two extra inputs the agent has not seen (odd/even length, negatives, comments).
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same generator as environment/setup.sh ---
python3 - "$OUT" <<'PY'
import random, sys
rng = random.Random(42)
with open(sys.argv[1] + "/readings.txt", "w") as f:
    f.write("# sensor readings, one integer per line\n")
    for i in range(24):
        f.write(f"{rng.randint(-40, 120)}\n")
        if i % 7 == 3:
            f.write("\n")
    f.write("# end of readings\n")
PY
# ----------------------------------------------
printf '# odd count\n7\n-3\n\n10\n1\n  4\n# trailing comment\n' > "$OUT/odd.txt"
printf '5\n-8\n13\n2\n-1\n21\n' > "$OUT/even.txt"

[ -f /app/stats.py ] || fail "/app/stats.py is missing"
for input in readings odd even; do
  want=$(python3 - "$OUT/$input.txt" <<'PY'
import statistics, sys
nums = [int(l) for l in open(sys.argv[1]) if l.strip() and not l.strip().startswith("#")]
print(f"count={len(nums)}")
print(f"mean={statistics.mean(nums):.2f}")
print(f"median={statistics.median(nums):.2f}")
print(f"max={max(nums)}")
PY
)
  got=$(cd "$OUT" && timeout 10 python3 /app/stats.py "$OUT/$input.txt" 2>&1)
  [ "$got" = "$want" ] || fail "wrong output for $input input: got [$(echo $got | head -c 200)] want [$(echo $want)]"
done
echo "PASS"
echo 1 > /logs/verifier/reward.txt
