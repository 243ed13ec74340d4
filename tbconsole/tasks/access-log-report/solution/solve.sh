#!/bin/bash
set -e
cd /app
t=$(mktemp -d)
# field 1 = client IP, 7 = request target, 9 = status, NF = response time (ms)
awk -v counts="$t/counts" -v slowest="$t/slowest" '{
  n++; ip[$1] = 1
  if ($9 >= 500 && $9 <= 599) err++
  p = $7; sub(/\?.*/, "", p)
  cnt[p]++; ms[p] += $NF
}
END {
  for (i in ip) u++
  printf "requests=%d\nunique_ips=%d\nserver_error_pct=%.2f\n", n, u, 100 * err / n
  for (p in cnt) print cnt[p], p > counts
  best = ""
  for (p in cnt) if (cnt[p] >= 50 && (best == "" || ms[p] / cnt[p] > ms[best] / cnt[best])) best = p
  printf "slowest=%s %.1f\n", best, ms[best] / cnt[best] > slowest
}' access.log > "$t/head"
{
  cat "$t/head"
  sort -k1,1nr -k2,2 "$t/counts" | head -3 | awk '{ printf "top%d=%s %d\n", NR, $2, $1 }'
  cat "$t/slowest"
} > report.txt
rm -rf "$t"
