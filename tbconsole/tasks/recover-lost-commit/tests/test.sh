#!/bin/bash
# Reward 1 iff the original lost commit and the old main tip are both ancestors of main,
# main is checked out and clean, and parser.py matches the lost commit.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --- same builder as environment/setup.sh ---
build_repo() {  # build_repo DIR: the initial repository, byte-for-byte reproducible
  (
    set -e
    export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
    export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com
    export GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
    c() { GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1" git commit -q -m "$2"; }
    mkdir -p "$1" && cd "$1"
    git init -q -b main .
    git config user.name Dev && git config user.email dev@example.com
    printf '# tools\n' > README.md
    git add -A && c '2024-02-01T09:00:00Z' 'Initial commit'
    printf 'import json\n\n\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n' > config.py
    git add -A && c '2024-02-02T09:00:00Z' 'Add config loader'
    printf 'def parse(line):\n    key, _, value = line.partition("=")\n    return key.strip(), value.strip()\n' > parser.py
    git add -A && c '2024-02-03T09:00:00Z' 'Add parser module'
    git reset -q --hard HEAD~1
    printf '# tools\n\nSmall helpers: config loading.\n' > README.md
    git add -A && c '2024-02-04T09:00:00Z' 'Describe the tools in README'
  )
}
# --------------------------------------------
build_repo "$OUT/ref" >/dev/null 2>&1 || fail "test could not rebuild the reference repo"
old_main=$(git -C "$OUT/ref" rev-parse main)
lost=$(git -C "$OUT/ref" rev-parse 'HEAD@{2}')   # the commit the reset dropped
[ "$(git -C "$OUT/ref" log -1 --format=%s "$lost")" = "Add parser module" ] || fail "test bug: wrong lost commit"

R=/app/repo
git -C $R rev-parse --git-dir >/dev/null 2>&1 || fail "$R is not a git repository"
[ "$(git -C $R symbolic-ref -q HEAD)" = refs/heads/main ] || fail "main is not checked out"
git -C $R merge-base --is-ancestor "$lost" main 2>/dev/null || fail "the lost commit ${lost:0:12} is not in main's history"
git -C $R merge-base --is-ancestor "$old_main" main 2>/dev/null || fail "main lost its previous commits"
[ -f $R/parser.py ] || fail "parser.py is missing from the working tree"
git -C "$OUT/ref" show "$lost:parser.py" | cmp -s - $R/parser.py || fail "parser.py differs from the lost commit"
[ "$(git -C $R show main:README.md 2>/dev/null)" = "$(git -C "$OUT/ref" show "$old_main:README.md")" ] || fail "README.md from main was not kept"
[ -z "$(git -C $R status --porcelain)" ] || fail "working tree is not clean"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
