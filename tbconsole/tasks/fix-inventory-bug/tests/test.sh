#!/bin/bash
# Reward 1 iff the agent's inventory.py/report.py pass a pristine copy of run_tests.sh
# and render the same report as a reference implementation for unseen stock files.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same run_tests.sh and stock.csv as environment/setup.sh ---
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
# ---------------------------------------------------------------
for f in inventory.py report.py; do
  [ -f /app/inventory/$f ] || fail "/app/inventory/$f is missing"
  cp /app/inventory/$f "$OUT/$f"
done
res=$(timeout 20 bash "$OUT/run_tests.sh" 2>&1)
echo "$res" | grep -qx 'ALL TESTS PASSED' || fail "run_tests.sh does not pass: $(echo "$res" | head -3 | tr '\n' ' ')"

# Unseen data: prices that truncate badly as floats, ties, threshold edge.
cat > "$OUT/extra1.csv" <<'CSV'
sku,name,qty,unit_price
P9,Pencil,100,0.57
E1,Eraser,3,2.05
R4,Ruler,12,1.10
S2,Stapler,6,6.60
N5,Notepad,33,1.20
CSV
cat > "$OUT/extra2.csv" <<'CSV'
sku,name,qty,unit_price

Z1,Zinc plate,1,1.01
A9,Anvil,0,99.99
Q3,Quill,7,0.07
CSV
for extra in extra1 extra2; do
  want=$(python3 -B - "$OUT/$extra.csv" <<'PY'
import sys
items = []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    if line.strip():
        sku, name, qty, price = line.split(",")
        whole, frac = price.split(".")
        items.append((sku, name, int(qty), int(whole) * 100 + int(frac)))
fmt = lambda c: f"{c // 100}.{c % 100:02d}"
rows = sorted(items, key=lambda i: (-i[2] * i[3], i[0]))
out = [f"{s} {n}: {fmt(q * p)}" for s, n, q, p in rows]
out.append("TOTAL: " + fmt(sum(q * p for _, _, q, p in items)))
out.append("LOW STOCK: " + ", ".join(sorted(s for s, _, q, _ in items if q <= 5)))
print("\n".join(out))
PY
)
  got=$(cd "$OUT" && timeout 10 python3 -B report.py "$OUT/$extra.csv" 2>&1)
  [ "$got" = "$want" ] || fail "wrong report for unseen data $extra: got [$(echo "$got" | head -4 | tr '\n' ';')] want [$(echo "$want" | head -4 | tr '\n' ';')]"
done
echo "PASS"
echo 1 > /logs/verifier/reward.txt
