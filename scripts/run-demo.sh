#!/usr/bin/env bash
# make run: start a local three-node kvselect cluster and kvsim, a set of
# simulated vLLM workers that publish real KV events over ZMQ. kvsim
# registers its workers through a follower (which forwards the writes to
# the leader); every node subscribes to every worker itself. The demo sends
# a prompt to one worker and shows each node routing the same prompt to
# the worker that now holds its KV cache, then a booking on one node
# steering the next choice on another (replica sync of active load).
# Ctrl-C stops everything.
set -euo pipefail

PORT=${PORT:-8092}           # HTTP of n1; n2 and n3 use +100 and +200
RAFT_PORT=${RAFT_PORT:-7092} # Raft of n1; n2 and n3 use +100 and +200
SIM_PORT=${SIM_PORT:-8093}
BIN=${BIN:-bin}
SIM="http://127.0.0.1:${SIM_PORT}"

HTTP=() RAFT=() SYNC=() URLS=() INITIAL=""
for i in 0 1 2; do
  HTTP+=($((PORT + 100 * i))) RAFT+=($((RAFT_PORT + 100 * i))) SYNC+=($((RAFT_PORT + 1 + 100 * i)))
  URLS+=("http://127.0.0.1:${HTTP[$i]}")
  INITIAL+="${INITIAL:+,}n$((i + 1))=127.0.0.1:${RAFT[$i]}"
done

for p in "${HTTP[@]}" "${RAFT[@]}" "${SYNC[@]}" "$SIM_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is in use; pick others: make run PORT=... RAFT_PORT=... SIM_PORT=..." >&2
    exit 1
  fi
done

PIDS=() SIM_PID=
stop() {
  trap - INT TERM EXIT
  echo
  for p in $SIM_PID "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $SIM_PID "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "stopped kvsim and the three kvselect nodes"
}
trap stop INT TERM EXIT

rm -rf run/n1 run/n2 run/n3
for i in 0 1 2; do
  id="n$((i + 1))"
  mkdir -p "run/$id"
  "$BIN/kvselect" --node-id "$id" --bind 127.0.0.1 --port "${HTTP[$i]}" --raft-addr "127.0.0.1:${RAFT[$i]}" \
    --data-dir "run/$id" --initial-cluster "$INITIAL" --replica-sync-port "${SYNC[$i]}" --log-level warn 2> >(sed "s/^/  [$id] /" >&2) &
  PIDS+=($!)
done

ctl() { "$BIN/kvselectctl" --addr "$(IFS=,; echo "${URLS[*]}")" "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
pretty() { python3 -m json.tool --compact 2>/dev/null || cat; }
alive() { for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { echo "a kvselect node exited during startup" >&2; exit 1; }; done; }

# The cluster is up when every node knows the leader and every member's
# HTTP address (node metadata replicated through Raft).
for _ in $(seq 1 200); do
  ok=0
  for u in "${URLS[@]}"; do
    s=$(curl -sf "$u/cluster/status" 2>/dev/null | json 'int(d["leader"]["http_addr"]!="" and all(m["http_addr"] for m in d["members"]) and len(d["members"])==3)' 2>/dev/null || echo 0)
    ok=$((ok + s))
  done
  [ "$ok" = 3 ] && break
  alive
  sleep 0.1
done

echo; echo "== a three-node cluster on loopback: kvselectctl cluster status"
ctl cluster status | sed 's/^/   /'

LEADER=$(curl -s "${URLS[0]}/cluster/status" | json 'd["leader"]["id"]')
FOLLOWER=$(curl -s "${URLS[0]}/cluster/status" | json '[m["http_addr"] for m in d["members"] if m["id"]!=d["leader"]["id"]][0]')
FOLLOWER="http://$FOLLOWER"

# Three simulated vLLM workers (ids 1-3, model llama, 16-token blocks), each
# with a ZMQ PUB and a replay ROUTER, registered through a follower.
echo; echo "== kvsim registers three workers through follower $FOLLOWER (leader is $LEADER)"
"$BIN/kvsim" --workers 3 --model llama --block-size 16 --cache-blocks 1024 --control "127.0.0.1:${SIM_PORT}" \
  --register "$FOLLOWER" --log-level warn 2> >(sed 's/^/  [kvsim] /' >&2) | sed 's/^/  [kvsim] /' &
SIM_PID=$!
active() { curl -s "$1/ready" | json 'sum(1 for w in d["workers"] for l in (w.get("listeners") or {}).values() if l["state"]=="active")' 2>/dev/null || echo 0; }
for u in "${URLS[@]}"; do
  for _ in $(seq 1 200); do
    [ "$(active "$u")" = 3 ] && break
    kill -0 "$SIM_PID" 2>/dev/null || { echo "kvsim exited during startup" >&2; exit 1; }
    sleep 0.1
  done
done
echo "   every node subscribed to every worker's KV events itself:"
ctl workers list | sed 's/^/   /'

echo; echo "== a catalog write on the follower is forwarded to the leader"
echo "   PATCH $FOLLOWER/workers/3 {\"endpoint\":\"http://127.0.0.1:9003\"}"
curl -s -D - -o /dev/null -X PATCH "$FOLLOWER/workers/3" -H 'Content-Type: application/json' \
  -d '{"endpoint":"http://127.0.0.1:9003"}' | grep -iE '^(HTTP|X-Kvselect)' | sed 's/^/   → /'

# A 64-token prompt: 4 blocks of 16 tokens.
TOKENS=$(seq 101 164 | paste -sd, -)
PROMPT="\"model_name\":\"llama\",\"token_ids\":[$TOKENS]"
echo; echo "== worker 2 serves the prompt: kvsim stores 4 blocks and publishes BlockStored over ZMQ"
echo "   POST $SIM/prompt {\"worker_id\":2,...}"
curl -s -X POST "$SIM/prompt" -d "{\"worker_id\":2,\"dp_rank\":0,\"token_ids\":[$TOKENS]}" | pretty | sed 's/^/   → /'
held() { curl -s -X POST "$1/overlap_scores" -d "{$PROMPT}" | grep -q '"worker_id":2,"dp_rank":0,"device_blocks":4'; }
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do held "$u" && break; sleep 0.05; done; done

echo; echo "== every node routes the same prompt to worker 2, with 64 cached tokens (overlap.gpu)"
for i in 0 1 2; do
  echo "   n$((i + 1)): POST ${URLS[$i]}/select"
  curl -s -X POST "${URLS[$i]}/select" -d "{$PROMPT}" | json '"worker_id=%s dp_rank=%s overlap.gpu=%s effective_prefill_tokens=%s" % (d["worker_id"], d["dp_rank"], d["overlap"]["gpu"], d["effective_prefill_tokens"])' | sed 's/^/   → /'
done

# Replica sync: every node follows the others' bookings (no peer list: the
# members' replica-sync endpoints are in the catalog).
synced() { [ "$(curl -s "$1/replica_sync/peers" | json 'sum(1 for p in d["details"] if p["state"]=="active")' 2>/dev/null)" = 2 ]; }
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do synced "$u" && break; sleep 0.05; done; done
FRESH=$(seq 501 564 | paste -sd, -)
echo; echo "== replica sync: a booking on n1 counts on n2 and n3 and steers their next choice"
echo "   n1 selects and books a fresh prompt (no worker holds it):"
ctl select --model llama --tokens "$FRESH" --reserve req-1 | sed 's/^/   /'
BOOKED=$(curl -s "${URLS[0]}/reservations/req-1" | json 'd["worker_id"]')
for u in "${URLS[1]}" "${URLS[2]}"; do
  for _ in $(seq 1 100); do curl -sf -o /dev/null "$u/reservations/req-1" && break; sleep 0.02; done
done
echo "   n2 holds the booking too, mirrored from n1:"
"$BIN/kvselectctl" --addr "${URLS[1]}" reservations list | sed 's/^/   /'
"$BIN/kvselectctl" --addr "${URLS[1]}" loads --model llama | sed 's/^/   /'
echo "   n2 sends the same prompt elsewhere: worker $BOOKED already has it in flight"
curl -s -X POST "${URLS[1]}/select" -d "{\"model_name\":\"llama\",\"token_ids\":[$FRESH]}" | json '"worker_id=%s (booked on n1: worker '"$BOOKED"')" % d["worker_id"]' | sed 's/^/   → /'

echo; echo "== the request's lifecycle, reported to any node: prefill_complete on n2, DELETE on n3"
curl -s -X POST "${URLS[1]}/reservations/req-1/prefill_complete" >/dev/null
curl -s -X POST "${URLS[1]}/reservations/req-1/output_block" >/dev/null
curl -s -X DELETE "${URLS[2]}/reservations/req-1" >/dev/null
idle() { [ "$(curl -s "$1/loads" | json 'sum(l["active_requests"] for p in d for l in p["loads"])' 2>/dev/null)" = 0 ]; }
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do idle "$u" && break; sleep 0.02; done; done
for i in 0 1 2; do
  echo "   n$((i + 1)) active requests: $(curl -s "${URLS[$i]}/loads" | json 'sum(l["active_requests"] for p in d for l in p["loads"])')"
done

echo; echo "== worker 2 resets its cache (AllBlocksCleared over ZMQ); no node holds the prompt any more"
curl -s -X POST "$SIM/reset" -d '{"worker_id":2}' >/dev/null
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do held "$u" || break; sleep 0.05; done; done
ctl select --model llama --tokens "$TOKENS" | sed 's/^/   /'

echo
echo "kvselect: ${URLS[*]}   kvsim control: $SIM"
echo "Try: $BIN/kvselectctl --addr ${URLS[1]} cluster status | workers list | cluster stepdown"
echo "Ctrl-C stops everything."
wait "${PIDS[0]}"
