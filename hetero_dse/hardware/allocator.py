"""Where a timed torch call gets its memory: from the heap, reused, as in a network that keeps running.

glibc serves a block above its mmap threshold (128 KiB at first, raised as such blocks are freed) with a fresh
``mmap`` and unmaps it when it is freed, and it trims the heap's top back to the system above its trim threshold.
A torch call timed in a loop allocates its output, and oneDNN its blocked copies, on every call: where those are
megabytes, each call can pay page faults on all of them. The process then stays in that slow mode. On this
project's 2-core Zen 4, torch's 1×1 convolution 64 → 256 at 56² took 2.4 ms a call in that mode and 0.69 ms with
the thresholds raised (``bench/data/torch_malloc_mode.txt``). Left as it was, the per-layer ratios against torch
flattered our kernels, which write into buffers allocated once. PyTorch's CPU tuning guides recommend jemalloc
or tcmalloc for the same reason.

``serve_from_heap`` raises both thresholds in the process that times torch: its per-layer calls and torch eager
on a whole network (the plan executed beside it then shares the condition). That process's freed memory is then
kept for reuse, not returned to the system.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: the largest value a C int holds; glibc before 2.35 takes at most 32 MiB for the mmap threshold
LARGEST = 2**31 - 1
OLD_GLIBC_MMAP_MAX = 32 << 20


@functools.cache
def serve_from_heap() -> bool:
    """Raise glibc's mmap and trim thresholds in this process, once; whether they were raised (False where the C
    library has no ``mallopt``, as on musl or macOS, where the timing keeps the allocator as it is)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mmap = mallopt(M_MMAP_THRESHOLD, LARGEST) or mallopt(M_MMAP_THRESHOLD, OLD_GLIBC_MMAP_MAX)
    return bool(mmap) and bool(mallopt(M_TRIM_THRESHOLD, LARGEST))
