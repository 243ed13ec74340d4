#!/bin/bash
# Writes /app/users.json deterministically (tests/test.sh carries the same generator).
set -e
OUT=/app
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
