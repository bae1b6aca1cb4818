"""The Ray flow example, end to end against a real node."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "ray_flow.py")


def run_example(*args: str) -> str:
    out = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def booking_line(out: str) -> dict:
    """The explicit POST /reservations of step 4, as the example prints it."""
    [line] = [l for l in out.splitlines() if l.strip().startswith('{"reservation_id"')]
    return json.loads(line[line.index("{"):line.rindex("}") + 1])


def test_example_with_its_own_workers(node):
    out = run_example("--kvselect", node)
    assert out.rstrip().endswith("done"), out
    # Step 4 is seed 000's explicit booking: the selected worker rank, the
    # prompt's sequence hashes and length, and the selection's effective
    # prefill tokens; the node books exactly that.
    m = re.search(r"worker (90[12]) rank (\d+), 0 tokens cached, effective prefill 64", out)
    assert m, out
    assert booking_line(out) == {"reservation_id": booking_line(out)["reservation_id"], "model_name": "llama",
                                 "worker_id": int(m[1]), "dp_rank": int(m[2]), "sequence_hashes": [21, 22, 23, 24],
                                 "isl_tokens": 64, "effective_prefill_tokens": 64}
    assert "4. reserve" in out and f"booked on worker {m[1]} rank {m[2]}: 64 prefill tokens" in out, out
    assert "'active_prefill_tokens': 64, 'active_decode_blocks': 4, 'active_requests': 1" in out, out
    # Step 6 books a selection by its selection_id alone.
    assert re.search(r"booked by selection_id sel-\w+ on worker 90[12] rank 0: 64 prefill tokens", out), out


def test_example_with_kvsim(node, kvsim):
    out = run_example("--kvselect", node, "--kvsim", kvsim, "--model", "qwen")
    booked = booking_line(out)
    assert {"worker_id", "dp_rank", "effective_prefill_tokens"} <= set(booked) and "with the 64 token_ids" in out
    assert "booked by selection_id" in out
    # The second selection of the prompt finds the blocks the worker stored.
    assert "64 tokens cached, effective prefill 0" in out, out
