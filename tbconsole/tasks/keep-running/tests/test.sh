#!/bin/bash
# Reward 1 iff the PID in /app/worker.pid is a live (non-zombie) process and
# /app/heartbeat.log gains a fresh "beat <now>" line within ~1.6 s.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }

PIDF=/app/worker.pid
LOG=/app/heartbeat.log
[ -f $PIDF ] || fail "$PIDF does not exist"
pid=$(tr -d ' \t\r\n' < $PIDF)
[[ "$pid" =~ ^[0-9]+$ ]] || fail "$PIDF does not hold a number: '$(head -c 40 $PIDF)'"
[ "$pid" -gt 1 ] || fail "pid $pid is not a worker"
[ -d /proc/$pid ] || fail "no process with pid $pid is running"
state=$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f1)   # field after "(comm)"
[ "$state" != Z ] && [ -n "$state" ] || fail "process $pid is dead (zombie)"
[ -f $LOG ] || fail "$LOG does not exist"

before=$(grep -c '' $LOG)
grew=0
for _ in $(seq 16); do
  sleep 0.1
  if [ "$(grep -c '' $LOG)" -gt "$before" ]; then grew=1; break; fi
done
[ $grew = 1 ] || fail "$LOG did not grow within 1.6 s ($before lines)"
[ -d /proc/$pid ] || fail "process $pid exited during the check"

last=$(tail -n 1 $LOG)
[[ "$last" =~ ^beat\ ([0-9]+)$ ]] || fail "last line has the wrong format: '$last'"
now=$(date +%s)
ts=${BASH_REMATCH[1]}
[ $((now - ts)) -le 3 ] && [ $((ts - now)) -le 3 ] || fail "last beat time $ts is not current (now $now)"
bad=$(grep -cvE '^beat [0-9]+$' $LOG)
[ "$bad" = 0 ] || fail "$LOG has $bad malformed lines"
echo "PASS"
echo 1 > /logs/verifier/reward.txt
