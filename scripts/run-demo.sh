#!/usr/bin/env bash
# make run: start a local kvselect node, walk through the Ray flow with
# curl, then keep the node running until Ctrl-C.
set -euo pipefail

PORT=${PORT:-8092}
RAFT_PORT=${RAFT_PORT:-7092}
BIN=${BIN:-bin}
DATA=run/n1
URL="http://127.0.0.1:${PORT}"

for p in "$PORT" "$RAFT_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is in use; pick others: make run PORT=... RAFT_PORT=..." >&2
    exit 1
  fi
done

rm -rf "$DATA"
mkdir -p "$DATA"
"$BIN/kvselect" --node-id n1 --port "$PORT" --bind 127.0.0.1 --raft-addr "127.0.0.1:${RAFT_PORT}" \
  --data-dir "$DATA" --log-level warn 2> >(sed 's/^/  [kvselect] /' >&2) &
PID=$!
stop() {
  trap - INT TERM EXIT
  if kill -0 "$PID" 2>/dev/null; then
    echo
    echo "stopping kvselect (pid $PID)"
    kill -TERM "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
}
trap stop INT TERM EXIT

for _ in $(seq 1 100); do
  curl -sf "$URL/health" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { echo "kvselect exited during startup" >&2; exit 1; }
  sleep 0.1
done

pretty() { if command -v python3 >/dev/null 2>&1; then python3 -m json.tool --compact 2>/dev/null || cat; else cat; fi; }
step() {
  local title=$1 method=$2 path=$3 body=${4:-}
  if [ -n "$title" ]; then echo; echo "== $title"; fi
  echo "   $method $path ${body}"
  if [ -n "$body" ]; then
    curl -s -X "$method" "$URL$path" -H 'Content-Type: application/json' -d "$body" | pretty | sed 's/^/   → /'
  else
    curl -s -X "$method" "$URL$path" | pretty | sed 's/^/   → /'
  fi
}

echo "kvselect node n1 on $URL (raft 127.0.0.1:${RAFT_PORT}, data in $DATA)"
PROMPT='"model_name":"llama","block_hashes":[11,12,13,14],"sequence_hashes":[21,22,23,24],"isl_tokens":64'

step "register two workers (writes go through Raft; the answer carries catalog_index)" POST /workers \
  '{"worker_id":1,"model_name":"llama","endpoint":"http://worker-1:8000","block_size":16,"kv_events_endpoint":"tcp://127.0.0.1:5557"}'
step "" POST /workers \
  '{"worker_id":2,"model_name":"llama","endpoint":"http://worker-2:8000","block_size":16,"kv_events_endpoint":"tcp://127.0.0.1:5558"}'
step "an incomplete worker is stored but never selected" POST /workers \
  '{"worker_id":3,"model_name":"llama","block_size":32}'
step "select a worker for a prompt (books nothing)" POST /select "{\"selection_id\":\"s-1\",$PROMPT}"
step "select and reserve atomically: the request's load is booked" POST /select_and_reserve "{\"reservation_id\":\"req-1\",$PROMPT}"
step "the next identical prompt goes to the other, idle worker" POST /select "{$PROMPT}"
step "Ray's select-then-reserve: book a request on the worker /select chose" POST /reservations \
  "{\"reservation_id\":\"req-2\",\"worker_id\":2,\"dp_rank\":0,\"effective_prefill_tokens\":64,$PROMPT}"
step "active load per worker rank" GET "/loads?model_name=llama"
step "what booking this prompt would add on each rank" POST /potential_loads "{$PROMPT}"
step "lifecycle: prefill done, one output block, then done" POST /reservations/req-1/prefill_complete
step "" POST /reservations/req-1/output_block '{"decay_fraction":0.5}'
step "" DELETE /reservations/req-1
step "" DELETE /reservations/req-2
step "load is back to zero" GET "/loads?model_name=llama"
step "cluster view" GET /cluster/status

echo
echo "kvselect is running on $URL — try the README's curl walk-through. Ctrl-C stops it."
wait "$PID"
