"""GPU devices the schedules are generated for: the limits checked before building and the peaks used
by the roofline estimate when no GPU is present. Figures from the vendors' datasheets."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetero_dse.errors import HeteroDSEError


@dataclass(frozen=True)
class GpuDevice:
    name: str
    arch: str                      # nvcc's sm_XY
    max_threads_per_block: int
    shared_memory_per_block: int   # bytes without opt-in (static __shared__)
    max_vthreads: int              # virtual threads per thread (TVM vthread), a register-pressure guard
    sms: int
    fp32_tflops: float             # non-tensor-core FP32 peak
    memory_gbps: float
    shared_memory_per_sm: int      # bytes, the most a multiprocessor gives its resident blocks
    l2_gbps: float                 # L2 read bandwidth (microbenchmarks; the vendors do not publish it)
    clock_ghz: float               # boost clock

    @property
    def target(self) -> dict[str, str]:
        return {"kind": "cuda", "arch": self.arch}


DEVICES = {
    # NVIDIA H100 SXM5 datasheet: 132 SMs, 67 TFLOPS FP32, 3.35 TB/s HBM3, 1.98 GHz boost; 48 KB static shared
    # memory per block, 228 KB per SM; L2 ~5.5 TB/s as measured by Chips and Cheese (2023)
    "h100": GpuDevice("h100", "sm_90", 1024, 48 * 1024, 16, 132, 67.0, 3350.0, 228 * 1024, 5500.0, 1.98),
    # NVIDIA V100 SXM2 datasheet: 80 SMs, 15.7 TFLOPS FP32, 900 GB/s HBM2, 1.53 GHz; 96 KB shared memory per
    # SM; L2 ~2.1 TB/s (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018)
    "v100": GpuDevice("v100", "sm_70", 1024, 48 * 1024, 16, 80, 15.7, 900.0, 96 * 1024, 2100.0, 1.53),
}


def get_device(name: str) -> GpuDevice:
    try:
        return DEVICES[name.lower()]
    except KeyError:
        raise HeteroDSEError(f"unknown GPU {name!r}; known: {', '.join(DEVICES)}") from None


DEFAULT_CUDA_HOME = "/usr/local/cuda"  # where TVM looks when nvcc is not on PATH


def present_gpu() -> GpuDevice | None:
    """The CUDA device of this machine, or None: its own limits from the driver, the peaks of the named
    device of the same architecture where one is known (the peaks only matter to the estimate)."""
    import tvm

    dev = tvm.cuda(0)
    if not dev.exist:
        return None
    arch = "sm_" + str(dev.compute_version).replace(".", "")
    known = next((d for d in DEVICES.values() if d.arch == arch), DEVICES["h100"])
    return replace(known, name=str(dev.device_name), arch=arch, max_threads_per_block=int(dev.max_threads_per_block),
                   shared_memory_per_block=int(dev.max_shared_memory_per_block),
                   sms=int(dev.multi_processor_count))


def cuda_toolkit() -> str:
    """The path of nvcc, which TVM calls to compile CUDA; a clear error when there is none."""
    import os
    import shutil

    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidates = [shutil.which("nvcc"), *([os.path.join(home, "bin", "nvcc")] if home else []),
                  os.path.join(DEFAULT_CUDA_HOME, "bin", "nvcc")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise HeteroDSEError("--target gpu needs the CUDA toolkit to generate code, and nvcc is neither on PATH nor in "
                         "$CUDA_HOME/bin: install it (e.g. apt install nvidia-cuda-toolkit) or set CUDA_HOME")
