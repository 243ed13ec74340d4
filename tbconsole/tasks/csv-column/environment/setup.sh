#!/bin/bash
# Writes /app/people.csv (tests/test.sh carries the same data).
set -e
OUT=/app
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
