#!/bin/bash
# Reward 1 iff the agent's Makefile, run in a scratch copy with test-controlled src/ files,
# builds build/stats.txt correctly from scratch and keeps it up to date when src/ changes.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

[ -f /app/proj/Makefile ] || fail "/app/proj/Makefile is missing"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cp /app/proj/Makefile "$W/Makefile"
mkdir "$W/src"
printf 'one two three\nfour\n' > "$W/src/a.txt"
printf 'five six\n\nseven\n' > "$W/src/b.txt"
cd "$W"
export MAKEFLAGS=
stamp=$(( $(date +%s) + 10 ))   # future mtimes, so changes are newer whatever the clock granularity

check() {  # check STEP
  [ -f build/all.txt ] || fail "$1: build/all.txt was not built"
  cmp -s build/all.txt <(cat src/*.txt) || fail "$1: build/all.txt is not the concatenation of src/*.txt"
  want="lines=$(wc -l < build/all.txt | tr -d ' ') words=$(wc -w < build/all.txt | tr -d ' ')"
  [ -f build/stats.txt ] || fail "$1: build/stats.txt was not written"
  got=$(cat build/stats.txt)
  [ "$got" = "$want" ] || fail "$1: build/stats.txt is '$got', expected '$want'"
  [ "$(grep -c '' build/stats.txt)" = 1 ] || fail "$1: build/stats.txt must have exactly one line"
}

timeout 10 make -s stats >/dev/null 2>"$W/err" || fail "'make stats' failed from a clean tree: $(head -c 200 "$W/err")"
check "from scratch"

printf 'eight nine ten\neleven\n' > src/c.txt; touch -d "@$stamp" src/c.txt
timeout 10 make -s stats >/dev/null 2>"$W/err" || fail "'make stats' failed after adding a src file: $(head -c 200 "$W/err")"
check "after adding src/c.txt"

printf 'twelve\n' >> src/a.txt; touch -d "@$((stamp + 10))" src/a.txt
timeout 10 make -s stats >/dev/null 2>"$W/err" || fail "'make stats' failed after changing a src file: $(head -c 200 "$W/err")"
check "after changing src/a.txt"

timeout 10 make -s clean >/dev/null 2>&1 || fail "'make clean' failed"
[ ! -e build ] || fail "'make clean' did not remove build/"
timeout 10 make -s build >/dev/null 2>&1 || fail "'make build' failed"
cmp -s build/all.txt <(cat src/*.txt) || fail "'make build' no longer builds build/all.txt"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
