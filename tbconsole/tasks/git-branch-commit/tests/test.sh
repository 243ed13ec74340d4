#!/bin/bash
# Reward 1 iff feature/greeting = main + exactly one commit "Add greeting feature" whose tree
# is main's tree plus all pending changes, main is unchanged, and the working tree is clean.
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
    mkdir -p "$1" && cd "$1"
    git init -q -b main .
    git config user.name Dev && git config user.email dev@example.com
    printf '# demo app\n' > README.md
    printf 'def main():\n    print("app")\n\n\nif __name__ == "__main__":\n    main()\n' > app.py
    git add -A
    GIT_AUTHOR_DATE='2024-01-01T10:00:00Z' GIT_COMMITTER_DATE='2024-01-01T10:00:00Z' git commit -q -m 'Initial commit'
    printf '# demo app\n\nRun with `python3 app.py`.\n' > README.md
    GIT_AUTHOR_DATE='2024-01-02T10:00:00Z' GIT_COMMITTER_DATE='2024-01-02T10:00:00Z' git commit -q -am 'Document usage'
    # the uncommitted work the agent has to commit
    printf 'def greet(name):\n    return f"Hello, {name}!"\n\n\ndef main():\n    print(greet("app"))\n\n\nif __name__ == "__main__":\n    main()\n' > app.py
    printf 'Hello, {name}!\n' > greeting.txt
  )
}
# --------------------------------------------
build_repo "$OUT/ref" >/dev/null 2>&1 || fail "test could not rebuild the reference repo"
main0=$(git -C "$OUT/ref" rev-parse main)
want_tree=$(cd "$OUT/ref" && git add -A && git write-tree)

R=/app/repo
BR=feature/greeting
git -C $R rev-parse --git-dir >/dev/null 2>&1 || fail "$R is not a git repository"
[ "$(git -C $R rev-parse -q --verify refs/heads/main)" = "$main0" ] || fail "main moved away from its original commit"
tip=$(git -C $R rev-parse -q --verify "refs/heads/$BR") || fail "branch $BR does not exist"
[ "$(git -C $R rev-parse -q --verify "$tip^")" = "$main0" ] || fail "$BR must be exactly one commit on top of main"
[ "$(git -C $R rev-list --count "$tip")" = 3 ] || fail "$BR tip is not a plain single commit on main"
msg=$(git -C $R log -1 --format=%B "$tip")
[ "$msg" = "Add greeting feature" ] || fail "commit message is '$msg'"
[ "$(git -C $R rev-parse "$tip^{tree}")" = "$want_tree" ] || fail "the commit does not contain exactly the pending changes (it changes: $(git -C $R diff --name-only "$main0" "$tip" | tr '\n' ' '))"
[ -z "$(git -C $R status --porcelain)" ] || fail "working tree is not clean"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
