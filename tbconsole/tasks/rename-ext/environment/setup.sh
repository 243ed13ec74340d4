#!/bin/bash
# Each file holds "content of <its original name>" so the test can check contents.
set -e
mkdir -p /app/notes/old
cd /app/notes
for f in todo.txt ideas.txt "meeting notes.txt" README.md data.csv archive.txt.bak old/draft.txt old/log.md; do
  printf 'content of %s\n' "$f" > "$f"
done
