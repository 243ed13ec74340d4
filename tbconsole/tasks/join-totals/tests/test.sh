#!/bin/bash
# Reward 1 iff /app/totals.csv equals the totals recomputed from freshly generated inputs.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same generator as environment/setup.sh ---
python3 - "$OUT" <<'PY'
import random, sys
rng = random.Random(2024)
names = ["Alice Moreau", "Bob Chen", "Carla Diaz", "Deepak Rao", "Eva Novak",
         "Femi Adeyemi", "Gustav Berg", "Hana Sato", "Ivan Petrov", "Julia Costa"]
ids = [101 + 7 * i for i in range(len(names))]
with open(sys.argv[1] + "/customers.csv", "w") as f:
    f.write("customer_id,name\n")
    for cid, name in zip(ids, names):
        f.write(f"{cid},{name}\n")
buyers = ids[:8]          # the last two customers never order
rows = [f"{5000 + i},{rng.choice(buyers)},{rng.randint(5, 400)}" for i in range(60)]
for r in rng.sample(rows, 9):   # duplicated export lines
    rows.insert(rng.randrange(len(rows) + 1), r)
with open(sys.argv[1] + "/orders.csv", "w") as f:
    f.write("order_id,customer_id,amount\n")
    f.write("".join(r + "\n" for r in rows))
PY
# ----------------------------------------------
python3 - "$OUT" > "$OUT/expected.csv" <<'PY'
import csv, sys
d = sys.argv[1]
names = {r["customer_id"]: r["name"] for r in csv.DictReader(open(d + "/customers.csv"))}
orders = {r["order_id"]: r for r in csv.DictReader(open(d + "/orders.csv"))}
totals = {}
for o in orders.values():
    totals[names[o["customer_id"]]] = totals.get(names[o["customer_id"]], 0) + int(o["amount"])
print("name,total")
for name, t in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
    print(f"{name},{t}")
PY

F=/app/totals.csv
[ -f "$F" ] || fail "$F does not exist"
got=$(tr -d '\r' < "$F")
want=$(cat "$OUT/expected.csv")
if [ "$got" != "$want" ]; then
  fail "$F differs from the expected result; first difference: $(diff <(echo "$got") <(echo "$want") | grep -m2 '^[<>]' | tr '\n' ' ')"
fi
echo "PASS"
echo 1 > /logs/verifier/reward.txt
