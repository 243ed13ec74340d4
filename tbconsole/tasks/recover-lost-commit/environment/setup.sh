#!/bin/bash
# Builds /app/repo (tests/test.sh carries the same build_repo to recompute commit ids).
set -e
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
rm -rf /app/repo   # start from scratch even if the workdir was not empty
build_repo /app/repo
