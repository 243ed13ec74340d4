#!/bin/bash
# Reward 1 iff /app/report.txt matches statistics recomputed from a freshly generated log.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same generator as environment/setup.sh ---
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
# ----------------------------------------------
F=/app/report.txt
[ -f "$F" ] || fail "$F does not exist"
msg=$(python3 - "$OUT/access.log" "$F" <<'PY'
import re, sys
from fractions import Fraction
n, errs, ips, cnt, ms = 0, 0, set(), {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    n += 1
    ips.add(f[0])
    errs += 500 <= int(f[8]) <= 599
    p = f[6].split("?")[0]
    cnt[p] = cnt.get(p, 0) + 1
    ms[p] = ms.get(p, 0) + int(f[-1])
top = sorted(cnt, key=lambda p: (-cnt[p], p))[:3]
slow = max((p for p in cnt if cnt[p] >= 50), key=lambda p: Fraction(ms[p], cnt[p]))
want = [("requests", str(n)), ("unique_ips", str(len(ips))), ("server_error_pct", Fraction(100 * errs, n))]
want += [(f"top{i + 1}", f"{p} {cnt[p]}") for i, p in enumerate(top)]
want += [("slowest", (slow, Fraction(ms[slow], cnt[slow])))]
lines = open(sys.argv[2]).read().replace("\r", "").rstrip("\n").split("\n")
if len(lines) != 7:
    sys.exit(f"report has {len(lines)} lines, expected 7")

def close(text, exact, decimals):  # correctly rounded to that many decimals (either side on an exact tie)
    if not re.fullmatch(r"\d+\.\d{%d}" % decimals, text):
        return False
    return abs(Fraction(text) - exact) <= Fraction(1, 2 * 10 ** decimals)

for line, (key, val) in zip(lines, want):
    k, sep, v = line.partition("=")
    if k != key or not sep:
        sys.exit(f"expected a '{key}=' line, got '{line}'")
    if key == "server_error_pct":
        ok = close(v, val, 2)
        shown = f"{float(val):.2f}"
    elif key == "slowest":
        path, _, avg = v.partition(" ")
        ok = path == val[0] and close(avg, val[1], 1)
        shown = f"{val[0]} {float(val[1]):.1f}"
    else:
        ok, shown = v == val, val
    if not ok:
        sys.exit(f"wrong {key}: got '{v}', expected '{shown}'")
PY
) || fail "$msg"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
