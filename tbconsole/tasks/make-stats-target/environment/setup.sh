#!/bin/bash
set -e
mkdir -p /app/proj/src
cd /app/proj
printf 'alpha beta\ngamma\n' > src/a.txt
printf 'delta epsilon zeta\n' > src/b.txt
printf 'eta\ntheta iota\nkappa\n' > src/c.txt
# recipe lines must start with a TAB
printf '%s\n' \
  'SRC := $(wildcard src/*.txt)' \
  '' \
  '.PHONY: build clean' \
  '' \
  'build: build/all.txt' \
  '' \
  'build/all.txt: $(SRC)' \
  '	mkdir -p build' \
  '	cat $(SRC) > $@' \
  '' \
  'clean:' \
  '	rm -rf build' > Makefile
