#!/bin/bash
# Writes /app/report.sh: a broken shebang on top of the body (tests/test.sh carries the same body).
set -e
OUT=$(mktemp -d)
cat > "$OUT/body.sh" <<'SH'
# Prints a small inventory report (uses bash arrays, so /bin/sh will not do).
items=(apples pears plums)
counts=(3 5 8)
total=0
for i in "${!items[@]}"; do
  printf '%-6s %2d\n' "${items[$i]}" "${counts[$i]}"
  total=$((total + counts[i]))
done
echo "total $total"
SH
{ echo '#!/bin/bahs'; cat "$OUT/body.sh"; } > /app/report.sh
chmod 644 /app/report.sh
rm -rf "$OUT"
