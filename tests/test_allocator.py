"""Torch is timed with its memory from the heap (``hetero_dse/hardware/allocator.py``): a timed call's megabytes
of output are not mmap'd and page-faulted afresh on every call, the slow mode that made torch's 1×1 layers 3.5×
slower in its per-layer timings than in a running network."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

#: in a fresh process: an 8 MiB block (above glibc's first mmap threshold, which freeing it raises to 8 MiB), then
#: a 16 MiB one, and whether each was mmap'd (mallinfo2's hblks with it, less without)
PROBE = """
import ctypes, sys
from hetero_dse.hardware.allocator import serve_from_heap
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype, libc.malloc.restype, libc.malloc.argtypes = Info, ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def mapped(size):
    block = libc.malloc(size)
    count = libc.mallinfo2().hblks
    libc.free(block)
    return count - libc.mallinfo2().hblks
first = mapped(8 << 20)
raised = serve_from_heap() if sys.argv[1] == "heap" else None
print(first, raised, mapped(16 << 20))
"""


def _probe(mode: str) -> list[str]:
    run = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc 2.33 or later (mallinfo2)")
def test_serve_from_heap_keeps_large_blocks_off_mmap():
    # as glibc is left: the 16 MiB block is mmap'd (what a torch call's output was on every call)
    assert _probe("default") == ["1", "None", "1"]
    # raised: from the heap
    assert _probe("heap") == ["1", "True", "0"]


def test_torch_per_layer_and_eager_timings_ask_for_the_heap(monkeypatch):
    from gpu_cpu import baselines
    from hetero_dse.ops import get_builtin

    asked = []
    monkeypatch.setattr(baselines, "serve_from_heap", lambda: asked.append(True))
    assert baselines.time_torch_cpu(get_builtin("gemm").instantiate({"M": 8, "N": 8, "K": 8}), repeat=1,
                                    min_seconds=0.001) > 0
    assert asked == [True]
    import torch

    from hetero_dse.hardware import allocator
    from hetero_dse.model.capture import time_eager

    monkeypatch.setattr(allocator, "serve_from_heap", lambda: asked.append("eager"))
    time_eager(torch.nn.Linear(4, 4), torch.ones(1, 4), repeat=1)
    assert asked == [True, "eager"]
