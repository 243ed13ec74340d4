#!/bin/bash
# Builds /app/inventory: buggy inventory.py/report.py plus run_tests.sh and stock.csv
# (tests/test.sh carries the same run_tests.sh and stock.csv).
set -e
OUT=/app/inventory
mkdir -p "$OUT"
cat > "$OUT/run_tests.sh" <<'SH'
#!/bin/bash
# Checks for the inventory report. Usage: bash run_tests.sh
cd "$(dirname "$0")" || exit 1
python3 -B - <<'PY'
import sys
import inventory, report

fails = 0


def check(name, got, want):
    global fails
    if got != want:
        fails += 1
        print(f"FAIL {name}:\n  got:  {got!r}\n  want: {want!r}")


check("parse_line", inventory.parse_line("A1,Widget,3,2.30\n"),
      {"sku": "A1", "name": "Widget", "qty": 3, "price_cents": 230})
check("price 19.99", inventory.parse_line("Z9,Thing,1,19.99")["price_cents"], 1999)
check("stock value", inventory.stock_value_cents({"qty": 3, "price_cents": 230}), 690)
check("format_cents", [report.format_cents(c) for c in (0, 5, 705, 12340)],
      ["0.00", "0.05", "7.05", "123.40"])
check("low_stock", [i["sku"] for i in report.low_stock(
    [{"sku": "B", "qty": 5}, {"sku": "A", "qty": 6}, {"sku": "C", "qty": 0}])], ["B", "C"])
check("report", report.render(inventory.load("stock.csv")), """\
K300 Kettle: 179.90
B200 Blender: 175.60
D250 Desk fan: 79.95
L700 Lamp bulb: 43.50
M100 Mug: 43.50
C150 Coaster: 28.75
T500 Tea towel: 11.60
TOTAL: 562.80
LOW STOCK: B200, D250, K300""")
if fails:
    print(f"{fails} check(s) failed")
    sys.exit(1)
print("ALL TESTS PASSED")
PY
SH
cat > "$OUT/stock.csv" <<'CSV'
sku,name,qty,unit_price
M100,Mug,10,4.35
K300,Kettle,5,35.98
T500,Tea towel,40,0.29
B200,Blender,4,43.90
C150,Coaster,25,1.15
L700,Lamp bulb,30,1.45
D250,Desk fan,5,15.99
CSV
cat > "$OUT/inventory.py" <<'PY'
"""Parsing and arithmetic for the stock file (CSV: sku,name,qty,unit_price)."""


def parse_line(line):
    """Parse 'sku,name,qty,unit_price' into a dict.

    unit_price is a decimal string with two decimals, e.g. '2.30';
    it is stored as an exact whole number of cents (230).
    """
    sku, name, qty, price = line.strip().split(",")
    return {"sku": sku, "name": name, "qty": int(qty),
            "price_cents": int(float(price) * 100)}


def load(path):
    """All items of a stock file, skipping the header line and blank lines."""
    items = []
    with open(path) as f:
        next(f)
        for line in f:
            if line.strip():
                items.append(parse_line(line))
    return items


def stock_value_cents(item):
    """Value of the stock of one item, in cents: quantity times unit price."""
    return item["qty"] + item["price_cents"]
PY
cat > "$OUT/report.py" <<'PY'
"""Stock report: one line per item, then the total and the low-stock list."""
import sys

from inventory import load, stock_value_cents

LOW_STOCK = 5


def format_cents(cents):
    """705 -> '7.05'"""
    return f"{cents // 100}.{cents % 100}"


def low_stock(items, threshold=LOW_STOCK):
    """Items whose qty is at or below the threshold, sorted by sku."""
    return sorted((i for i in items if i["qty"] < threshold), key=lambda i: i["sku"])


def render(items):
    """Items by stock value, highest first (ties: sku ascending), then TOTAL and LOW STOCK."""
    lines = []
    total = 0
    for item in sorted(items, key=lambda i: (stock_value_cents(i), i["sku"])):
        value = stock_value_cents(item)
        total += value
        lines.append(f"{item['sku']} {item['name']}: {format_cents(value)}")
    lines.append(f"TOTAL: {format_cents(total)}")
    lines.append("LOW STOCK: " + ", ".join(i["sku"] for i in low_stock(items)))
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(load(sys.argv[1])))
PY
