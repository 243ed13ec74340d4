#!/bin/bash
# Creates /app/shop.db (tests/test.sh carries the same generator).
set -e
OUT=/app
rm -f /app/shop.db
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
