#!/bin/bash
# Writes /app/readings.txt (tests/test.sh carries the same generator) and the buggy /app/stats.py.
set -e
OUT=/app
python3 - "$OUT" <<'PY'
import random, sys
rng = random.Random(42)
with open(sys.argv[1] + "/readings.txt", "w") as f:
    f.write("# sensor readings, one integer per line\n")
    for i in range(24):
        f.write(f"{rng.randint(-40, 120)}\n")
        if i % 7 == 3:
            f.write("\n")
    f.write("# end of readings\n")
PY
cat > /app/stats.py <<'PY'
import sys


def read_numbers(path):
    nums = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                nums.append(int(line))
    return nums


def median(nums):
    n = len(nums)
    mid = n // 2
    if n % 2 == 0:
        return (nums[mid] + nums[mid + 1]) / 2
    return nums[mid]


def main():
    nums = read_numbers(sys.argv[1])
    print(f"count={len(nums)}")
    print(f"mean={sum(nums) // len(nums):.2f}")
    print(f"median={median(nums):.2f}")
    print(f"max={min(nums)}")


main()
PY
