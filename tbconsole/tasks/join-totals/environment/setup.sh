#!/bin/bash
# Writes /app/customers.csv and /app/orders.csv (tests/test.sh carries the same generator).
set -e
OUT=/app
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
