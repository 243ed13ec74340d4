#!/bin/bash
# Reward 1 iff main is a merge commit (old main, feature tip) with the resolved settings.ini,
# both branches' other changes, no conflict markers, and a clean checked-out tree.
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
    ini() {  # ini PORT TIMEOUT RETRIES BACKOFF
      printf '[server]\nhost = 0.0.0.0\nport = %s\ntimeout = %s\n\n[client]\nretries = %s\nbackoff = %s\nuser_agent = demo/1.0\n' "$@" > settings.ini
    }
    mkdir -p "$1" && cd "$1"
    git init -q -b main .
    git config user.name Dev && git config user.email dev@example.com
    ini 8080 30 3 linear
    printf '# service\n' > README.md
    git add -A && c '2024-03-01T09:00:00Z' 'Initial config'
    git switch -q -c feature/tuning
    ini 8080 60 5 linear
    git add -A && c '2024-03-02T09:00:00Z' 'Tune timeout and retries'
    mkdir -p docs && printf '# Tuning\n\nTimeout raised to 60 s for slow upstreams.\n' > docs/tuning.md
    git add -A && c '2024-03-03T09:00:00Z' 'Document tuning'
    git switch -q main
    ini 9090 45 4 exponential
    git add -A && c '2024-03-04T09:00:00Z' 'Move to port 9090, exponential backoff'
    printf '# service\n\nListens on port 9090.\n' > README.md
    git add -A && c '2024-03-05T09:00:00Z' 'Document port'
  )
}
# --------------------------------------------
build_repo "$OUT/ref" >/dev/null 2>&1 || fail "test could not rebuild the reference repo"
old_main=$(git -C "$OUT/ref" rev-parse main)
feature=$(git -C "$OUT/ref" rev-parse feature/tuning)
# expected settings.ini: main's file with the feature branch's timeout line
ft=$(git -C "$OUT/ref" show feature/tuning:settings.ini | grep '^timeout = ')
want_ini=$(git -C "$OUT/ref" show main:settings.ini | sed "s/^timeout = .*/$ft/")

R=/app/repo
git -C $R rev-parse --git-dir >/dev/null 2>&1 || fail "$R is not a git repository"
[ "$(git -C $R symbolic-ref -q HEAD)" = refs/heads/main ] || fail "main is not checked out"
[ ! -e "$(git -C $R rev-parse --git-path MERGE_HEAD)" ] || fail "the merge is still in progress (not committed)"
parents=$(git -C $R log -1 --format=%P main)
[ "$parents" = "$old_main $feature" ] || fail "main's tip is not a merge of old main and feature/tuning (parents: ${parents:-none})"
[ "$(git -C $R rev-parse -q --verify refs/heads/feature/tuning)" = "$feature" ] || fail "feature/tuning was moved"
got_ini=$(git -C $R show main:settings.ini 2>/dev/null)
grep -qE '^(<<<<<<<|=======|>>>>>>>)' <<<"$got_ini" && fail "settings.ini still contains conflict markers"
[ "$got_ini" = "$want_ini" ] || fail "settings.ini is not resolved as asked: $(diff <(echo "$want_ini") <(echo "$got_ini") | grep '^[<>]' | tr '\n' ' ')"
for f in docs/tuning.md README.md; do
  src=$([ $f = README.md ] && echo main || echo feature/tuning)
  [ "$(git -C $R show main:$f 2>/dev/null)" = "$(git -C "$OUT/ref" show $src:$f)" ] || fail "$f does not match the $src version"
done
[ -z "$(git -C $R status --porcelain)" ] || fail "working tree is not clean"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
