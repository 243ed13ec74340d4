#!/bin/bash
set -e
cd /app/repo
git checkout -q main
git merge --no-edit feature/tuning || true     # stops on the settings.ini conflict
git checkout --ours settings.ini                 # main's port/retries/backoff ...
timeout=$(git show feature/tuning:settings.ini | sed -n 's/^timeout = //p')
sed -i "s/^timeout = .*/timeout = $timeout/" settings.ini   # ... with the feature's timeout
git add settings.ini
git commit -q --no-edit
