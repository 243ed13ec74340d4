#!/bin/bash
# Five bugs: float truncation of prices and '+' instead of '*' (inventory.py);
# missing zero padding, '<' instead of '<=', and ascending sort (report.py).
set -e
cd /app/inventory
sed -i 's/int(float(price) \* 100)/round(float(price) * 100)/' inventory.py
sed -i 's/item\["qty"\] + item\["price_cents"\]/item["qty"] * item["price_cents"]/' inventory.py
sed -i 's/{cents % 100}/{cents % 100:02d}/' report.py
sed -i 's/i\["qty"\] < threshold/i["qty"] <= threshold/' report.py
sed -i 's/key=lambda i: (stock_value_cents(i), i\["sku"\])/key=lambda i: (-stock_value_cents(i), i["sku"])/' report.py
bash run_tests.sh
