#!/bin/bash
# Reward 1 iff /app/top_products.txt holds the March top 3 recomputed from a freshly built db.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same generator as environment/setup.sh ---
python3 - "$OUT/shop.db" <<'PY'
import random, sqlite3, sys
rng = random.Random(7)
products = [("Desk Lamp", 2499), ("Notebook", 399), ("Mechanical Keyboard", 8999),
            ("USB-C Cable", 1299), ("Monitor Arm", 5450), ("Coffee Mug", 1150),
            ("Webcam", 6900), ("Mouse Pad", 999), ("Headphones", 12900), ("Desk Plant", 1875)]
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE products(id INTEGER PRIMARY KEY, name TEXT, price_cents INTEGER)")
db.execute("CREATE TABLE sales(id INTEGER PRIMARY KEY, product_id INTEGER, qty INTEGER, sold_on TEXT)")
db.executemany("INSERT INTO products(id, name, price_cents) VALUES (?, ?, ?)",
               [(i + 1, n, p) for i, (n, p) in enumerate(products)])
sales = []
for i in range(120):
    month = rng.choice([2, 3, 3, 4])
    day = rng.randint(1, 29 if month == 2 else 30)
    sales.append((i + 1, rng.randint(1, len(products)), rng.randint(1, 12), f"2024-{month:02d}-{day:02d}"))
# a few boundary dates
sales += [(121, 9, 3, "2024-02-29"), (122, 3, 4, "2024-03-31"), (123, 9, 2, "2024-04-01")]
db.executemany("INSERT INTO sales VALUES (?, ?, ?, ?)", sales)
db.commit()
db.close()
PY
# ----------------------------------------------
want=$(python3 - "$OUT/shop.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rev = {}
for name, qty, price, day in db.execute(
        "SELECT p.name, s.qty, p.price_cents, s.sold_on FROM sales s, products p WHERE p.id = s.product_id"):
    if "2024-03-01" <= day <= "2024-03-31":
        rev[name] = rev.get(name, 0) + qty * price
for name, r in sorted(rev.items(), key=lambda kv: -kv[1])[:3]:
    print(f"{name}|{r}")
PY
)
F=/app/top_products.txt
[ -f "$F" ] || fail "$F does not exist"
got=$(tr -d '\r' < "$F")
[ "$got" = "$want" ] || fail "got [$(echo "$got" | head -5 | tr '\n' ';')] want [$(echo "$want" | tr '\n' ';')]"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
