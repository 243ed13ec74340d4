#!/bin/bash
for f in /app/notes/*.txt; do
  [ -f "$f" ] && mv -- "$f" "${f%.txt}.md"
done
