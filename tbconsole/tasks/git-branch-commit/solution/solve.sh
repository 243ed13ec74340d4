#!/bin/bash
set -e
cd /app/repo
git switch -c feature/greeting
git add -A
git commit -q -m 'Add greeting feature'
