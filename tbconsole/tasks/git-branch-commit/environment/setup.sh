#!/bin/bash
# Builds /app/repo (tests/test.sh carries the same build_repo to recompute hashes).
set -e
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
rm -rf /app/repo   # start from scratch even if the workdir was not empty
build_repo /app/repo
