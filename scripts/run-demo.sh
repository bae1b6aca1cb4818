#!/usr/bin/env bash
# make run: start a local three-node kvselect cluster and kvsim, a set of
# simulated vLLM workers that publish real KV events over ZMQ. kvsim
# registers its workers through a follower (which forwards the writes to
# the leader); every node subscribes to every worker itself. The demo sends
# a prompt to one worker and shows each node routing the same prompt to
# the worker that now holds its KV cache, then a booking on one node
# steering the next choice on another (replica sync of active load).
#
# The cluster runs as a deployment should: every route but the probes'
# needs a token (run/admin-token for catalog writes, run/selection-token
# for what a Ray caller does), fresh ones each run.
#
# Then it keeps running for you to try things, failovers included: it
# prints each node's pid and keeps going while any node is up, so stopping
# one (kill <pid>, or kvselectctl cluster stepdown) shows the other two
# electing a leader and still selecting. Ctrl-C (or SIGTERM) stops
# everything; so does the last node's exit.
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

# One demo per checkout: its data, tokens and logs are in ./run, which a
# start wipes. run/demo.pids lists what the running demo started (pid,
# then what it is); while any of those lives, a second start (on other
# ports too) refuses and changes nothing.
DEMO_PIDS=run/demo.pids
if [ -f "$DEMO_PIDS" ]; then
  RUNNING=() LIVE=()
  while read -r pid what; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then RUNNING+=("$what pid $pid"); LIVE+=("$pid"); fi
  done < "$DEMO_PIDS"
  if [ "${#LIVE[@]}" -gt 0 ]; then
    list=$(printf '%s, ' "${RUNNING[@]}")
    echo "make run: the demo of this checkout is still running (${list%, }); stop it first with Ctrl-C where it runs, or kill ${LIVE[*]}; nothing was changed (if those pids are not the demo's, remove $PWD/$DEMO_PIDS)" >&2
    exit 1
  fi
fi

ALL_PORTS=("${HTTP[@]}" "${RAFT[@]}" "${SYNC[@]}" "$SIM_PORT")
if [ "$(printf '%s\n' "${ALL_PORTS[@]}" | sort -u | wc -l)" != "${#ALL_PORTS[@]}" ]; then
  echo "PORT=$PORT RAFT_PORT=$RAFT_PORT SIM_PORT=$SIM_PORT overlap: the nodes use PORT, PORT+100, PORT+200 (HTTP)," >&2
  echo "RAFT_PORT, +100, +200 (Raft) and each of those +1 (replica sync), kvsim SIM_PORT" >&2
  exit 1
fi
for p in "${ALL_PORTS[@]}"; do
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
  rm -f "$DEMO_PIDS"
  echo "stopped kvsim and the kvselect nodes"
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

# The interpreter itself, resolved once: a version manager's python3 shim
# (pyenv, asdf) can take most of a second to start, and the polls below
# parse JSON hundreds of times.
PY=$(python3 -c 'import sys; print(sys.executable)')

# Fresh tokens, readable by you alone; curl reads the headers that carry
# them from files (-H @file), so they never show in a process list.
rm -rf run/n1 run/n2 run/n3
mkdir -p run
echo "$$ run-demo.sh" > "$DEMO_PIDS"
for t in admin selection; do
  (umask 077; "$PY" -c 'import secrets; print(secrets.token_hex(32))' > "run/$t-token"
   printf 'Authorization: Bearer %s\n' "$(cat "run/$t-token")" > "run/$t.header")
done
ADMIN_TOKEN="$PWD/run/admin-token"
acurl() { curl -H @run/admin.header "$@"; }     # with the admin token
scurl() { curl -H @run/selection.header "$@"; } # with the selection token

for i in 0 1 2; do
  id="n$((i + 1))"
  mkdir -p "run/$id"
  "$BIN/kvselect" --node-id "$id" --bind 127.0.0.1 --port "${HTTP[$i]}" --raft-addr "127.0.0.1:${RAFT[$i]}" \
    --data-dir "run/$id" --initial-cluster "$INITIAL" --replica-sync-port "${SYNC[$i]}" \
    --auth-token-file run/admin-token --selection-token-file run/selection-token --log-level warn 2> >(sed "s/^/  [$id] /" >&2) &
  PIDS+=($!)
  echo "$! $id ${URLS[$i]}" >> "$DEMO_PIDS"
done

ctl() { KVSELECT_TOKEN_FILE="$ADMIN_TOKEN" "$BIN/kvselectctl" --addr "$(IFS=,; echo "${URLS[*]}")" "$@"; }
json() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
pretty() { "$PY" -m json.tool --compact 2>/dev/null || cat; }
alive() { for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { echo "a kvselect node exited during startup" >&2; exit 1; }; done; }

# The cluster is up when every node knows the leader and every member's
# HTTP address (node metadata replicated through Raft).
for _ in $(seq 1 200); do
  ok=0
  for u in "${URLS[@]}"; do
    s=$(scurl -sf "$u/cluster/status" 2>/dev/null | json 'int(d["leader"]["http_addr"]!="" and all(m["http_addr"] for m in d["members"]) and len(d["members"])==3)' 2>/dev/null || echo 0)
    ok=$((ok + s))
  done
  [ "$ok" = 3 ] && break
  alive
  sleep 0.1
done

echo; echo "== a three-node cluster on loopback: kvselectctl cluster status"
ctl cluster status | sed 's/^/   /'

echo; echo "== every route but the probes' needs a token (the nodes run with --auth-token-file and --selection-token-file)"
echo "   GET /loads without a token → $(curl -s -o /dev/null -w '%{http_code}' "${URLS[0]}/loads")"
echo "   GET /loads with the selection token → $(scurl -s -o /dev/null -w '%{http_code}' "${URLS[0]}/loads")"
echo "   DELETE /workers/9 with the selection token → $(scurl -s -X DELETE "${URLS[0]}/workers/9" | json 'd["code"]')   (catalog writes need the admin token)"

LEADER=$(scurl -s "${URLS[0]}/cluster/status" | json 'd["leader"]["id"]')
FOLLOWER=$(scurl -s "${URLS[0]}/cluster/status" | json '[m["http_addr"] for m in d["members"] if m["id"]!=d["leader"]["id"]][0]')
FOLLOWER="http://$FOLLOWER"

# Three simulated vLLM workers (ids 1-3, model llama, 16-token blocks), each
# with a ZMQ PUB and a replay ROUTER, registered through a follower.
echo; echo "== kvsim registers three workers through follower $FOLLOWER (leader is $LEADER)"
# (Redirections, not a pipe, so that $! is kvsim itself, which stop() kills.)
"$BIN/kvsim" --workers 3 --model llama --block-size 16 --cache-blocks 1024 --control "127.0.0.1:${SIM_PORT}" \
  --register "$FOLLOWER" --auth-token-file run/admin-token --log-level warn > >(sed 's/^/  [kvsim] /') 2> >(sed 's/^/  [kvsim] /' >&2) &
SIM_PID=$!
echo "$SIM_PID kvsim $SIM" >> "$DEMO_PIDS"
active() { scurl -s "$1/ready" | json 'sum(1 for w in d["workers"] for l in (w.get("listeners") or {}).values() if l["state"]=="active")' 2>/dev/null || echo 0; }
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
echo "   PATCH $FOLLOWER/workers/3 {\"total_kv_blocks\":1024}   (kvsim's --cache-blocks)"
acurl -s -D - -o /dev/null -X PATCH "$FOLLOWER/workers/3" -H 'Content-Type: application/json' \
  -d '{"total_kv_blocks":1024}' | grep -iE '^(HTTP|X-Kvselect)' | sed 's/^/   → /'

# A 64-token prompt: 4 blocks of 16 tokens.
TOKENS=$(seq 101 164 | paste -sd, -)
PROMPT="\"model_name\":\"llama\",\"token_ids\":[$TOKENS]"
# A worker's registered endpoint is where kvsim serves it: a caller sends
# the request /select chose to endpoint/prompt.
W2=$(scurl -s "${URLS[0]}/workers/2" | json 'd["endpoint"]')
echo; echo "== worker 2 serves the prompt at its endpoint: kvsim stores 4 blocks and publishes BlockStored over ZMQ"
echo "   POST $W2/prompt {\"dp_rank\":0,\"token_ids\":[101,...,164]}"
curl -s -X POST "$W2/prompt" -d "{\"dp_rank\":0,\"token_ids\":[$TOKENS]}" | pretty | sed 's/^/   → /'
held() { scurl -s -X POST "$1/overlap_scores" -d "{$PROMPT}" | grep -q '"worker_id":2,"dp_rank":0,"device_blocks":4'; }
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do held "$u" && break; sleep 0.05; done; done

echo; echo "== every node routes the same prompt to worker 2, with 64 cached tokens (overlap.gpu)"
for i in 0 1 2; do
  echo "   n$((i + 1)): POST ${URLS[$i]}/select"
  scurl -s -X POST "${URLS[$i]}/select" -d "{$PROMPT}" | json '"worker_id=%s dp_rank=%s overlap.gpu=%s effective_prefill_tokens=%s" % (d["worker_id"], d["dp_rank"], d["overlap"]["gpu"], d["effective_prefill_tokens"])' | sed 's/^/   → /'
done

# Replica sync: every node follows the others' bookings (no peer list: the
# members' replica-sync endpoints are in the catalog).
synced() { [ "$(acurl -s "$1/replica_sync/status" | json 'sum(1 for p in d["peers"] if p["state"]=="active")' 2>/dev/null)" = 2 ]; }
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do synced "$u" && break; sleep 0.05; done; done
FRESH=$(seq 501 564 | paste -sd, -)
echo; echo "== replica sync: a booking on n1 counts on n2 and n3 and steers their next choice"
echo "   n1 selects and books a fresh prompt (no worker holds it):"
ctl select --model llama --tokens "$FRESH" --reserve req-1 | sed 's/^/   /'
BOOKED=$(scurl -s "${URLS[0]}/reservations/req-1" | json 'd["worker_id"]')
for u in "${URLS[1]}" "${URLS[2]}"; do
  for _ in $(seq 1 100); do scurl -sf -o /dev/null "$u/reservations/req-1" && break; sleep 0.02; done
done
echo "   n2 holds the booking too, mirrored from n1:"
KVSELECT_TOKEN_FILE="$ADMIN_TOKEN" "$BIN/kvselectctl" --addr "${URLS[1]}" reservations list | sed 's/^/   /'
KVSELECT_TOKEN_FILE="$ADMIN_TOKEN" "$BIN/kvselectctl" --addr "${URLS[1]}" loads --model llama | sed 's/^/   /'
echo "   n2 sends the same prompt elsewhere: worker $BOOKED already has it in flight"
scurl -s -X POST "${URLS[1]}/select" -d "{\"model_name\":\"llama\",\"token_ids\":[$FRESH]}" | json '"worker_id=%s (booked on n1: worker '"$BOOKED"')" % d["worker_id"]' | sed 's/^/   → /'

echo; echo "== the request's lifecycle, reported to any node: prefill_complete on n2, DELETE on n3"
scurl -s -X POST "${URLS[1]}/reservations/req-1/prefill_complete" >/dev/null
scurl -s -X POST "${URLS[1]}/reservations/req-1/output_block" >/dev/null
scurl -s -X DELETE "${URLS[2]}/reservations/req-1" >/dev/null
idle() { [ "$(scurl -s "$1/loads" | json 'sum(l["active_requests"] for p in d for l in p["loads"])' 2>/dev/null)" = 0 ]; }
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do idle "$u" && break; sleep 0.02; done; done
for i in 0 1 2; do
  echo "   n$((i + 1)) active requests: $(scurl -s "${URLS[$i]}/loads" | json 'sum(l["active_requests"] for p in d for l in p["loads"])')"
done

echo; echo "== worker 2 resets its cache (AllBlocksCleared over ZMQ); no node holds the prompt any more"
curl -s -X POST "$SIM/reset" -d '{"worker_id":2}' >/dev/null
for u in "${URLS[@]}"; do for _ in $(seq 1 100); do held "$u" || break; sleep 0.05; done; done
ctl select --model llama --tokens "$TOKENS" | sed 's/^/   /'

LEADER=$(scurl -s "${URLS[0]}/cluster/status" | json 'd["leader"]["id"]')
ADDRS=$(IFS=,; echo "${URLS[*]}")
echo; echo "== running: the three nodes, kvsim (control API $SIM) and its workers 1-3 (model llama)"
for i in 0 1 2; do
  echo "   n$((i + 1))  pid ${PIDS[$i]}  ${URLS[$i]}$([ "n$((i + 1))" = "$LEADER" ] && echo "  (leader)")"
done
echo "   kvsim  pid $SIM_PID  $SIM"
cat <<EOT

== try a failover: the demo keeps running while any node does (paste in another shell)
   export KVSELECT_ADDR=$ADDRS   # kvselectctl tries these in order
   export KVSELECT_TOKEN_FILE=$ADMIN_TOKEN   # the admin token; curl: -H @$PWD/run/admin.header
   $BIN/kvselectctl cluster stepdown     # the leader hands leadership to another voter; or stop a node:
   kill <pid of the leader>             # SIGTERM hands leadership over first; kill -9 makes the others elect one
   $BIN/kvselectctl cluster status       # who leads now; the leader's own (--addr its URL) also shows the stopped node REACHABLE no
   curl -s -X POST $SIM/workers/1/prompt -d "{\"token_ids\":[\$(seq -s, 201 264)]}"
   $BIN/kvselectctl select --model llama --tokens \$(seq -s, 201 264)
                                        # worker 1, 64 cached tokens: a surviving node selects, no quorum needed
   $BIN/kvselectctl workers patch 3 --total-kv-blocks 2048
                                        # a catalog write goes through the leader: it needs 2 of the 3 nodes

Ctrl-C stops everything.
EOT

# Wait for Ctrl-C (the traps) or for every node to have exited, saying
# which node stopped when one does. wait -n returns as soon as a node
# exits or a trapped signal arrives.
REPORTED=()
while :; do
  live=()
  for i in 0 1 2; do
    if kill -0 "${PIDS[$i]}" 2>/dev/null; then
      live+=("${PIDS[$i]}")
    elif [ -z "${REPORTED[$i]:-}" ]; then
      REPORTED[$i]=1
      echo "== n$((i + 1)) (pid ${PIDS[$i]}) has stopped"
    fi
  done
  if [ "${#live[@]}" = 0 ]; then
    echo "== every kvselect node has stopped; the demo ends"
    exit 0
  fi
  [ "${#live[@]}" -lt 3 ] && echo "   still running: ${#live[@]} of 3 nodes (a write needs 2)"
  wait -n "${live[@]}" 2>/dev/null || sleep 0.5 # (bash < 5.1 has no wait -n with pids: poll)
done
