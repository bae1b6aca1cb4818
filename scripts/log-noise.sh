#!/usr/bin/env bash
# Counts the log lines of a make-run-like cluster by level, to see how
# noisy an outage is: three kvselect nodes started as run-demo.sh starts
# them, but without its tokens (no workers, so /ready answers 503), a few /ready polls, one
# follower stopped for DOWN seconds and started again, then everything
# stopped. The merged log goes to OUT; the summary is printed:
#
#   lines=… DEBUG=… INFO=… WARN=… ERROR=…
#
# Other ports than make run's by default, so both can run at once.
#   BIN=bin PORT=18092 RAFT_PORT=17092 LOG_LEVEL=info LOG_FORMAT=text DOWN=20 scripts/log-noise.sh
set -euo pipefail

PORT=${PORT:-18092}
RAFT_PORT=${RAFT_PORT:-17092}
BIN=${BIN:-bin}
LOG_LEVEL=${LOG_LEVEL:-info}
LOG_FORMAT=${LOG_FORMAT:-text}
DOWN=${DOWN:-20}
DIR=${DIR:-run/log-noise}
OUT=${OUT:-$DIR/log.txt}

HTTP=() RAFT=() URLS=() INITIAL=""
for i in 0 1 2; do
  HTTP+=($((PORT + 100 * i))) RAFT+=($((RAFT_PORT + 100 * i)))
  URLS+=("http://127.0.0.1:${HTTP[$i]}")
  INITIAL+="${INITIAL:+,}n$((i + 1))=127.0.0.1:${RAFT[$i]}"
done
for p in "${HTTP[@]}" "${RAFT[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is in use; pick others: PORT=... RAFT_PORT=..." >&2
    exit 1
  fi
done

rm -rf "$DIR/n1" "$DIR/n2" "$DIR/n3"
mkdir -p "$DIR" "$(dirname "$OUT")"
: >"$OUT"
PIDS=("" "" "")
start() {
  local i=$1 id="n$(($1 + 1))"
  mkdir -p "$DIR/$id"
  "$BIN/kvselect" --node-id "$id" --bind 127.0.0.1 --port "${HTTP[$i]}" --raft-addr "127.0.0.1:${RAFT[$i]}" \
    --data-dir "$DIR/$id" --initial-cluster "$INITIAL" --log-level "$LOG_LEVEL" --log-format "$LOG_FORMAT" \
    2>>"$DIR/$id.log" &
  PIDS[$i]=$!
}
stop() {
  trap - INT TERM EXIT
  for p in "${PIDS[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
}
trap stop INT TERM EXIT
rm -f "$DIR"/n?.log
for i in 0 1 2; do start "$i"; done

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# up N: every running node knows the leader and N reachable members.
up() {
  local want=$1 ok=0 s
  shift
  for u in "$@"; do
    s=$(curl -sf "$u/cluster/status" 2>/dev/null | json "int(d['leader']['id']!='' and sum(1 for m in d['members'] if m['reachable'] and m['http_addr'])==$want)" 2>/dev/null || echo 0)
    ok=$((ok + s))
  done
  [ "$ok" = "$#" ]
}
wait_up() { for _ in $(seq 1 300); do up "$@" && return 0; sleep 0.1; done; echo "cluster did not settle" >&2; exit 1; }
wait_up 3 "${URLS[@]}"

for _ in 1 2 3; do for u in "${URLS[@]}"; do curl -s -o /dev/null "$u/ready"; done; done

LEADER=$(curl -s "${URLS[0]}/cluster/status" | json 'd["leader"]["id"]')
for i in 0 1 2; do [ "n$((i + 1))" != "$LEADER" ] && VICTIM=$i; done
echo "leader $LEADER; stopping n$((VICTIM + 1)) for ${DOWN}s" >&2
kill -TERM "${PIDS[$VICTIM]}"
wait "${PIDS[$VICTIM]}" 2>/dev/null || true
sleep "$DOWN"
start "$VICTIM"
wait_up 3 "${URLS[@]}"
sleep 2
stop
for i in 0 1 2; do sed "s/^/[n$((i + 1))] /" "$DIR/n$((i + 1)).log"; done >"$OUT"

count() { grep -cE "level=$1|\"level\":\"$1\"" "$OUT" || true; }
echo "lines=$(wc -l <"$OUT") DEBUG=$(count DEBUG) INFO=$(count INFO) WARN=$(count WARN) ERROR=$(count ERROR)"
