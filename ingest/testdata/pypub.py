#!/usr/bin/env python3
"""A vLLM-style KV event publisher on real libzmq (pyzmq) for interop tests.

It binds a PUB socket and a ROUTER replay endpoint on loopback, prints
{"pub": ..., "replay": ...} as one JSON line, then reads commands from
stdin, one per line, and answers each with "ok":

  V <seq> <vector name> <live 0|1>   publish a payload of the vectors file
  H <seq> <live 0|1>                 publish an empty batch (msgpack-encoded here)

Every message goes into the replay buffer; "live 0" skips the PUB socket,
as a message lost on the wire. Replay follows vLLM's ZmqEventPublisher:
a request [identity, "", start_seq] is answered with
[identity, "", seq, payload] per buffered message with seq >= start_seq,
then [identity, "", ff*8, ""].
"""
import json
import struct
import sys
import threading
import time

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)
TOPIC = b"kv-events"


def main():
    vectors_path = sys.argv[1]
    with open(vectors_path) as f:
        vectors = {v["name"]: bytes.fromhex(v["hex"]) for v in json.load(f)["vectors"]}

    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    router = ctx.socket(zmq.ROUTER)
    replay_port = router.bind_to_random_port("tcp://127.0.0.1")

    buf = []
    lock = threading.Lock()
    stop = threading.Event()

    def serve_replay():
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        while not stop.is_set():
            if not poller.poll(50):
                continue
            frames = router.recv_multipart()
            if len(frames) != 3 or len(frames[2]) != 8:
                continue
            ident, start = frames[0], struct.unpack(">Q", frames[2])[0]
            with lock:
                msgs = [m for m in buf if m[0] >= start]
            for seq, payload in msgs:
                router.send_multipart([ident, b"", struct.pack(">Q", seq), payload])
            router.send_multipart([ident, b"", END_SEQ, b""])

    t = threading.Thread(target=serve_replay, daemon=True)
    t.start()
    print(json.dumps({"pub": f"tcp://127.0.0.1:{pub_port}",
                      "replay": f"tcp://127.0.0.1:{replay_port}"}), flush=True)

    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "V":
            seq, payload, live = int(parts[1]), vectors[parts[2]], parts[3] == "1"
        elif parts[0] == "H":
            seq, live = int(parts[1]), parts[2] == "1"
            payload = msgpack.packb([time.time(), [], 0])
        else:
            print("error unknown command", flush=True)
            continue
        with lock:
            buf.append((seq, payload))
        if live:
            pub.send_multipart([TOPIC, struct.pack(">Q", seq), payload])
        print("ok", flush=True)

    stop.set()
    t.join()
    pub.close(linger=0)
    router.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
