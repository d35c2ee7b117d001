"""The host CPU as TVM and torch should see it: its physical cores, given to every parallel loop.

TVM's runtime sizes its thread pool at half the logical CPUs on x86 unless ``TVM_NUM_THREADS`` says
otherwise: it assumes two hyper-threads per core. On a machine without SMT (this 2-vCPU VM: one thread per
core) that is one thread for two cores, and every measured schedule ran at half the machine against torch
on all of it (C4 of YOLO-v1: 78 GFLOPS with the default, 122 with two threads, torch 153, same process).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from hetero_dse.errors import HeteroDSEError


#: Set to 128, 256 or 512 to schedule for that vector width instead of the host's (another host of a
#: cluster; the test suite, so that it behaves the same on every x86-64 host).
VECTOR_BITS_ENV = "HETERO_DSE_VECTOR_BITS"


@cache
def host_vector_bits() -> int:
    """The host's widest float vector: 512 with AVX-512, 256 with AVX2, else 128 (``$HETERO_DSE_VECTOR_BITS``
    where set)."""
    forced = os.environ.get(VECTOR_BITS_ENV, "").strip()
    if forced:
        if forced not in ("128", "256", "512"):
            raise HeteroDSEError(f"{VECTOR_BITS_ENV}={forced!r}: the vector width is 128, 256 or 512 bits")
        return int(forced)
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return 256
    return 512 if " avx512f" in flags else 256 if " avx2" in flags else 128


@cache
def host_cores() -> int:
    """Physical cores this process may run on: distinct (package, core) pairs of the CPUs in its affinity
    mask, which counts hyper-threads once and honours a container's or taskset's limit."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(),
                       (topology / "core_id").read_text().strip()))
        except OSError:  # no sysfs topology (some containers): every CPU a core
            cores.add(("", str(cpu)))
    return max(1, len(cores))


def use_host_cores() -> None:
    """Size TVM's thread pool (read when it starts, at the first parallel loop of the process and of each
    worker, which inherit the environment) at the host's physical cores, unless the user chose a size."""
    os.environ.setdefault("TVM_NUM_THREADS", str(host_cores()))


@contextmanager
def torch_on_host_cores() -> Iterator[None]:
    """torch's intra-op threads at the host's physical cores for the block (as ``time_eager`` times eager), the
    count before it restored after: a network run or a profile inside explore leaves later work as it found it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(host_cores())
    try:
        yield
    finally:
        torch.set_num_threads(threads)
