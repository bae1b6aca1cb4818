"""The Ray flow example, end to end against a real node."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "ray_flow.py")


def run_example(*args: str) -> str:
    out = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_example_with_its_own_workers(node):
    out = run_example("--kvselect", node)
    assert "4. reserve" in out and "booked on worker 90" in out and out.rstrip().endswith("done")


def test_example_with_kvsim(node, kvsim):
    out = run_example("--kvselect", node, "--kvsim", kvsim, "--model", "qwen")
    # The second selection of the prompt finds the blocks the worker stored.
    assert "64 tokens cached, effective prefill 0" in out, out
