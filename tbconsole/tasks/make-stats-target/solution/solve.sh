#!/bin/bash
set -e
cd /app/proj
printf '%s\n' \
  '' \
  '.PHONY: stats' \
  'stats: build/stats.txt' \
  '' \
  'build/stats.txt: build/all.txt' \
  '	echo "lines=$$(wc -l < $<) words=$$(wc -w < $<)" > $@' >> Makefile
make stats
