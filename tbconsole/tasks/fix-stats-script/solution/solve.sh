#!/bin/bash
cat > /app/stats.py <<'PY'
import sys


def read_numbers(path):
    nums = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                nums.append(int(line))
    return nums


def median(nums):
    nums = sorted(nums)
    n = len(nums)
    mid = n // 2
    if n % 2 == 0:
        return (nums[mid - 1] + nums[mid]) / 2
    return nums[mid]


def main():
    nums = read_numbers(sys.argv[1])
    print(f"count={len(nums)}")
    print(f"mean={sum(nums) / len(nums):.2f}")
    print(f"median={median(nums):.2f}")
    print(f"max={max(nums)}")


main()
PY
