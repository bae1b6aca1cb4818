#!/usr/bin/env bash
# make run: start a local kvselect node and kvsim, a set of simulated vLLM
# workers that publish real KV events over ZMQ; register the workers, send
# a prompt to one of them, and show kvselect routing the same prompt to
# the worker that now holds its KV cache. Ctrl-C stops everything.
set -euo pipefail

PORT=${PORT:-8092}
RAFT_PORT=${RAFT_PORT:-7092}
SIM_PORT=${SIM_PORT:-8093}
BIN=${BIN:-bin}
DATA=run/n1
URL="http://127.0.0.1:${PORT}"
SIM="http://127.0.0.1:${SIM_PORT}"

for p in "$PORT" "$RAFT_PORT" "$SIM_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is in use; pick others: make run PORT=... RAFT_PORT=... SIM_PORT=..." >&2
    exit 1
  fi
done

rm -rf "$DATA"
mkdir -p "$DATA"
"$BIN/kvselect" --node-id n1 --port "$PORT" --bind 127.0.0.1 --raft-addr "127.0.0.1:${RAFT_PORT}" \
  --data-dir "$DATA" --log-level warn 2> >(sed 's/^/  [kvselect] /' >&2) &
PID=$!
SIM_PID=
stop() {
  trap - INT TERM EXIT
  echo
  for p in $SIM_PID $PID; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  echo "stopped kvsim and kvselect"
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

# Three simulated vLLM workers (ids 1-3, model llama, 16-token blocks), each
# with a ZMQ PUB and a replay ROUTER, registered with kvselect.
"$BIN/kvsim" --workers 3 --model llama --block-size 16 --cache-blocks 1024 --control "127.0.0.1:${SIM_PORT}" \
  --register "$URL" --log-level warn 2> >(sed 's/^/  [kvsim] /' >&2) | sed 's/^/  [kvsim] /' &
SIM_PID=$!
for _ in $(seq 1 100); do
  [ "$(curl -s "$URL/ready" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for w in d["workers"] for l in (w.get("listeners") or {}).values() if l["state"]=="active"))' 2>/dev/null)" = 3 ] && break
  kill -0 "$SIM_PID" 2>/dev/null || { echo "kvsim exited during startup" >&2; exit 1; }
  sleep 0.1
done

# A 64-token prompt: 4 blocks of 16 tokens.
TOKENS=$(seq 101 164 | paste -sd, -)
PROMPT="\"model_name\":\"llama\",\"token_ids\":[$TOKENS]"

step "kvsim registered three workers; each rank's KV event listener is active" GET /ready
step "before any request, no worker holds the prompt: no cache hit" POST /select "{$PROMPT}"
sim() { echo "   POST $SIM$1 $2"; curl -s -X POST "$SIM$1" -H 'Content-Type: application/json' -d "$2" | pretty | sed 's/^/   → /'; }
echo; echo "== worker 2 serves the prompt: kvsim stores 4 blocks and publishes BlockStored over ZMQ"
sim /prompt "{\"worker_id\":2,\"dp_rank\":0,\"token_ids\":[$TOKENS]}"
held() { curl -s -X POST "$URL/overlap_scores" -d "{$PROMPT}" | grep -q '"worker_id":2,"dp_rank":0,"device_blocks":4'; }
for _ in $(seq 1 100); do held && break; sleep 0.05; done
step "the same prompt now goes to worker 2, with 64 cached tokens (overlap.gpu)" POST /select "{\"selection_id\":\"s-1\",$PROMPT}"
step "select and reserve: the request's load is booked on worker 2" POST /select_and_reserve "{\"reservation_id\":\"req-1\",$PROMPT}"
step "active load per worker rank" GET "/loads?model_name=llama"
step "lifecycle: prefill done, one output block, then done" POST /reservations/req-1/prefill_complete
step "" POST /reservations/req-1/output_block '{"decay_fraction":0.5}'
step "" DELETE /reservations/req-1
echo; echo "== worker 2 resets its cache (AllBlocksCleared over ZMQ)"
echo "   POST $SIM/reset {\"worker_id\":2}"; curl -s -X POST "$SIM/reset" -d '{"worker_id":2}' >/dev/null
for _ in $(seq 1 100); do held || break; sleep 0.05; done
step "no worker holds the prompt any more" POST /overlap_scores "{$PROMPT}"
step "cluster view" GET /cluster/status

echo
echo "kvselect: $URL   kvsim control: $SIM (POST /prompt, /reset, /restart; GET /workers)"
echo "Try the README's walk-through. Ctrl-C stops everything."
wait "$PID"
