#!/bin/bash
# Generates /app/access.log deterministically (tests/test.sh carries the same generator).
set -e
OUT=/app
python3 - "$OUT" <<'PY'
import random, sys
rng = random.Random(99)
# target, weight, base response time (ms)
targets = [("/", 14, 20), ("/index.html", 6, 18), ("/api/users", 10, 120), ("/api/orders", 9, 160),
           ("/api/orders?page=2", 5, 170), ("/api/orders?page=3", 3, 175), ("/search?q=hats", 6, 230),
           ("/search?q=shoes", 6, 240), ("/search?q=socks", 4, 220), ("/static/app.js", 16, 8),
           ("/login", 5, 95), ("/health", 12, 2), ("/admin", 1, 400)]
pool = [t for t, w, _ in targets for _ in range(w)]
base = {t: b for t, _, b in targets}
ips = [f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}" for _ in range(80)]
active = rng.sample(ips, 53)
with open(sys.argv[1] + "/access.log", "w") as f:
    for i in range(1500):
        t = rng.choice(pool)
        status = rng.choices([200, 304, 404, 500, 503], [80, 8, 7, 3, 2])[0]
        method = "POST" if t == "/login" and rng.random() < 0.6 else "GET"
        ms = max(1, int(rng.gauss(base[t], base[t] / 4)))
        s = 9 * 3600 + 2 * i
        f.write(f'{rng.choice(active)} - - [01/Mar/2024:{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d} +0000] '
                f'"{method} {t} HTTP/1.1" {status} {rng.randint(0, 40000) if status != 304 else 0} {ms}\n')
PY
