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
rm -rf /app/repo   # start from scratch even if the workdir was not empty
build_repo /app/repo
