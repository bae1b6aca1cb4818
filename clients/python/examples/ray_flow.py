#!/usr/bin/env python3
"""The Ray flow of Dynamo's selection service (seed 000), with kvselect.

A runtime such as Ray registers its inference workers, asks kvselect which
worker should serve each prompt (POST /select), sends the request to that
worker itself, books it there (POST /reservations with the worker, its dp
rank, the prompt's sequence_hashes and isl_tokens, and the selection's
effective_prefill_tokens), and reports the request's life: first token
(prefill complete) and done (free). A selection made with a selection_id
can also be booked by that id alone. This script walks that flow against a
running node:

    python3 examples/ray_flow.py --kvselect http://127.0.0.1:8092

With --kvsim (the URL of kvsim's control API, as `make run` starts it),
"sending the request" really serves the prompt on a simulated vLLM worker,
which stores its KV blocks and publishes them over ZMQ; the next selection
of the same prompt then finds them:

    python3 examples/ray_flow.py --kvselect http://127.0.0.1:8092 --kvsim http://127.0.0.1:8093

Without --kvsim it registers two workers of its own (whose KV event
endpoints nothing publishes on), gives the prompt in seed 000's hash form
(block_hashes, sequence_hashes, isl_tokens, as Ray would compute them), and
removes the workers at the end. With --kvsim the prompt is token_ids, which
the node hashes itself (kvsim's workers serve real tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
import uuid
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kvselect import Client  # noqa: E402


def send_to_worker(kvsim: Optional[str], selection: Dict[str, Any], tokens: List[int]) -> None:
    """Stands for Ray calling the chosen worker. With kvsim, the simulated
    worker serves the prompt (stores its blocks, publishes BlockStored)."""
    if kvsim is None:
        print(f"   (send the request to {selection['endpoint']}, dp_rank {selection['dp_rank']})")
        return
    # kvsim's workers register <control API>/workers/{id} as their endpoint
    # and serve prompts at endpoint + "/prompt", as Ray would call a real
    # engine at the selected endpoint.
    body = json.dumps({"dp_rank": selection["dp_rank"], "token_ids": tokens})
    req = urllib.request.Request(selection["endpoint"].rstrip("/") + "/prompt", data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        served = json.load(resp)
    print(f"   worker {selection['worker_id']} served it: {served['blocks']} blocks, {served['cached_blocks']} cached, "
          f"{served['stored_blocks']} stored")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvselect", default="http://127.0.0.1:8092", help="kvselect node URLs, comma separated")
    ap.add_argument("--kvsim", help="kvsim control API URL: serve prompts on simulated workers")
    ap.add_argument("--model", default="llama", help="model_name of the workers")
    ap.add_argument("--token-file", help="file holding the bearer token (the admin token: the example registers workers)")
    ap.add_argument("--ca-file", help="PEM file of the CA that signs the nodes' HTTPS certificates")
    args = ap.parse_args()
    kv = Client(args.kvselect, token_file=args.token_file, ca_file=args.ca_file)

    print("1. register the workers (catalog writes go through the leader)")
    mine: List[int] = []
    if args.kvsim is None:
        for wid in (901, 902):
            w = kv.register_worker(wid, model_name=args.model, endpoint=f"http://worker-{wid}:8000", block_size=16,
                                   kv_events_endpoint=f"tcp://127.0.0.1:{40000 + wid}")
            mine.append(wid)
            print(f"   worker {wid}: {w['lifecycle']} at catalog index {w['catalog_index']}")
    workers = [w for w in kv.workers(model_name=args.model) if w["lifecycle"] == "schedulable"]
    print(f"   {len(workers)} schedulable workers for {args.model}; this client has seen catalog index "
          f"{kv.catalog_index}, so every node it asks will have applied it")
    block = workers[0]["block_size"]
    tokens = [1000 + i for i in range(4 * block)]  # a 4-block prompt

    # The prompt as Ray has it. Seed 000's form is hashes Ray computed:
    # block_hashes drive the KV index lookup, sequence_hashes the load
    # accounting. kvsim's workers hash real tokens, so with --kvsim the
    # prompt is token_ids and the node computes both hash lists.
    if args.kvsim is None:
        prompt: Dict[str, Any] = {"block_hashes": [11, 12, 13, 14], "sequence_hashes": [21, 22, 23, 24],
                                  "isl_tokens": len(tokens)}
        booked_prompt = {"sequence_hashes": prompt["sequence_hashes"], "isl_tokens": prompt["isl_tokens"]}
    else:
        prompt = {"token_ids": tokens}
        booked_prompt = prompt

    print("2. select a worker for the prompt (POST /select: books nothing)")
    sel = kv.select(model_name=args.model, **prompt)
    print(f"   worker {sel['worker_id']} rank {sel['dp_rank']}, {sel['overlap']['gpu']} tokens cached, "
          f"effective prefill {sel['effective_prefill_tokens']}")

    print("3. send the request to that worker")
    send_to_worker(args.kvsim, sel, tokens)

    print("4. reserve: book the request on the selected worker rank (POST /reservations)")
    rid = f"req-{uuid.uuid4().hex[:8]}"
    booking = dict(model_name=args.model, worker_id=sel["worker_id"], dp_rank=sel["dp_rank"], **booked_prompt,
                   effective_prefill_tokens=sel["effective_prefill_tokens"])
    print("   " + json.dumps({"reservation_id": rid, **{k: v for k, v in booking.items() if k != "token_ids"}}) +
          (f" with the {len(tokens)} token_ids" if "token_ids" in booking else ""))
    res = kv.reserve(rid, **booking)
    print(f"   {rid} booked on worker {res['worker_id']} rank {res['dp_rank']}: "
          f"{res['effective_prefill_tokens']} prefill tokens")
    print(f"   loads: {kv.loads(model_name=args.model)[0]['loads']}")

    print("5. first token: prefill_complete; done: free")
    kv.prefill_complete(rid)
    kv.free(rid)
    print(f"   loads: {kv.loads(model_name=args.model)[0]['loads']}")

    print("6. or book by selection_id: the node remembers a selection made with one (60 s, single use)")
    sid, rid = f"sel-{uuid.uuid4().hex[:8]}", f"req-{uuid.uuid4().hex[:8]}"
    sel = kv.select(model_name=args.model, selection_id=sid, **prompt)
    res = kv.reserve_selection(rid, sid)
    print(f"   {rid} booked by selection_id {sid} on worker {res['worker_id']} rank {res['dp_rank']}: "
          f"{res['effective_prefill_tokens']} prefill tokens")
    kv.prefill_complete(rid)
    kv.free(rid)

    if args.kvsim is not None:
        print("7. the same prompt again: the worker that served it now holds its KV blocks")
        for _ in range(100):  # the KV events travel over ZMQ; give them a moment
            again = kv.select_and_reserve(model_name=args.model, token_ids=tokens)
            kv.free(again["reservation_id"])
            if again["overlap"]["gpu"] > 0:
                break
            time.sleep(0.05)
        print(f"   worker {again['worker_id']} rank {again['dp_rank']}, {again['overlap']['gpu']} tokens cached, "
              f"effective prefill {again['effective_prefill_tokens']}")

    for wid in mine:
        kv.delete_worker(wid)
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
