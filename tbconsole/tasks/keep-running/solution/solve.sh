#!/bin/bash
# Detach fully (new session, no inherited stdio) so the caller's pipes can close.
cat > /app/worker.sh <<'SH'
#!/bin/bash
while :; do
  echo "beat $(date +%s)" >> /app/heartbeat.log
  sleep 1
done
SH
setsid bash /app/worker.sh </dev/null >/dev/null 2>&1 &
echo $! > /app/worker.pid
sleep 1.2   # let the first beats land
