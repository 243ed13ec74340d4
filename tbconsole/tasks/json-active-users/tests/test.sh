#!/bin/bash
# Reward 1 iff /app/active_users.txt lists exactly the users with "active": true, sorted.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same generator as environment/setup.sh ---
python3 - "$OUT" <<'PY'
import json, random, sys
rng = random.Random(5)
names = ["mallory", "alice", "trent", "bob", "peggy", "carol", "victor", "dave",
         "erin", "oscar", "frank", "grace", "heidi", "ivan", "judy", "niaj"]
users = []
for i, n in enumerate(names):
    u = {"id": i + 1, "name": n, "active": rng.random() < 0.55, "roles": rng.sample(["dev", "ops", "qa", "admin"], rng.randint(0, 2))}
    if i % 5 == 2:
        u["active"] = "true"   # a string, not the boolean: not active
    if i % 7 == 4:
        del u["active"]        # missing field: not active
    users.append(u)
json.dump(users, open(sys.argv[1] + "/users.json", "w"), indent=2)
PY
# ----------------------------------------------
want=$(python3 -c 'import json, sys; print("\n".join(sorted(u["name"] for u in json.load(open(sys.argv[1])) if u.get("active") is True)))' "$OUT/users.json")
F=/app/active_users.txt
[ -f "$F" ] || fail "$F does not exist"
got=$(tr -d '\r' < "$F")
[ "$got" = "$want" ] || fail "got [$(echo $got)] want [$(echo $want)]"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
