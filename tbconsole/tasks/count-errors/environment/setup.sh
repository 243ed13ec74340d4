#!/bin/bash
# Generates /app/server.log deterministically (tests/test.sh carries the same generator).
set -e
OUT=/app
python3 - "$OUT" <<'PY'
import random, sys
SEED, LINES = 1234, 400
rng = random.Random(SEED)
levels = ["INFO"] * 12 + ["DEBUG"] * 5 + ["WARN"] * 3 + ["ERROR"] * 2
comps = ["api", "db", "auth", "cache", "worker"]
msgs = {
    "INFO": ["request served", "recovered after error in previous run", "user logged in",
             "cache warmed", "job finished without errors"],
    "DEBUG": ["payload size checked", "error counter reset to 0", "retry policy loaded"],
    "WARN": ["slow query", "ERROR budget at 80%", "disk usage high"],
    "ERROR": ["connection refused", "timeout talking to upstream", "null token"],
}
with open(sys.argv[1] + "/server.log", "w") as f:
    for i in range(LINES):
        lvl = rng.choice(levels)
        h, m, s = 8 + i // 3600, (i // 60) % 60, i % 60
        f.write(f"2024-03-01T{h:02d}:{m:02d}:{s:02d} [{lvl}] {rng.choice(comps)}: {rng.choice(msgs[lvl])}\n")
PY
