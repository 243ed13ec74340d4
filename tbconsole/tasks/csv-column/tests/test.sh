#!/bin/bash
# Reward 1 iff /app/emails.txt lists the email column of the setup CSV, in order.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same data as environment/setup.sh ---
cat > "$OUT/people.csv" <<'CSV'
id,name,email,city
1,Ada Lovelace,ada@example.org,London
2,Alan Turing,alan.turing@example.com,Wilmslow
3,Grace Hopper,grace@navy.example.mil,Arlington
4,Edsger Dijkstra,ewd@example.nl,Nuenen
5,Barbara Liskov,liskov@mit.example.edu,Cambridge
6,Ken Thompson,ken@bell.example.com,Murray Hill
7,Margaret Hamilton,mh@apollo.example.gov,Houston
8,Donald Knuth,knuth@stanford.example.edu,Stanford
9,Frances Allen,fran@ibm.example.com,Peru
10,Dennis Ritchie,dmr@bell.example.com,Murray Hill
11,Radia Perlman,radia@example.net,Redmond
12,John McCarthy,jmc@stanford.example.edu,Stanford
CSV
# ----------------------------------------
COLUMN=email
python3 - "$OUT/people.csv" "$COLUMN" > "$OUT/expected.txt" <<'PY'
import csv, sys
with open(sys.argv[1], newline="") as f:
    for row in csv.DictReader(f):
        print(row[sys.argv[2]])
PY

F=/app/emails.txt
[ -f "$F" ] || fail "$F does not exist"
# Tolerate a missing final newline and CRLF endings; nothing else.
got=$(tr -d '\r' < "$F")
want=$(cat "$OUT/expected.txt")
[ "$got" = "$want" ] || fail "$F differs from the expected list (first line got: '$(head -1 "$F")', want: '$(head -1 "$OUT/expected.txt")'; $(grep -c '' "$F") lines, want $(grep -c '' "$OUT/expected.txt"))"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
