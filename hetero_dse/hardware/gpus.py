"""GPU devices the schedules are generated for: the limits checked before building and the peaks used
by the roofline estimate when no GPU is present. Figures from the vendors' datasheets."""

from __future__ import annotations

import functools
import re
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
    fp16_tensor_tflops: float = 0.0  # dense FP16 tensor-core peak with FP32 accumulation (0: none)
    int8_tensor_tops: float = 0.0    # dense INT8 tensor-core peak (0: none)
    #: the share of the tensor-core peak the warp-level MMA instructions (wmma, mma.sync) reach: Hopper's full
    #: rate needs its warpgroup instructions (wgmma), which TVM's tensor intrinsics do not emit
    warp_mma_fraction: float = 1.0

    @property
    def target(self) -> dict[str, str]:
        return {"kind": "cuda", "arch": self.arch}

    def tensor_tflops(self, dtype: str) -> float:
        """The tensor-core peak for ``dtype`` inputs (TFLOPS, or TOPS for integers); 0 where there is none.
        bfloat16 runs at the float16 rate from Ampere (sm_80) on, and not at all before it."""
        bf16 = self.fp16_tensor_tflops if self.compute_capability >= 80 else 0.0
        return {"float16": self.fp16_tensor_tflops, "bfloat16": bf16, "int8": self.int8_tensor_tops}.get(dtype, 0.0)

    @property
    def compute_capability(self) -> int:
        """``sm_90`` -> 90."""
        return int(self.arch.removeprefix("sm_"))


DEVICES = {
    # NVIDIA H100 SXM5 datasheet: 132 SMs, 67 TFLOPS FP32, 3.35 TB/s HBM3, 1.98 GHz boost; 48 KB static shared
    # memory per block, 228 KB per SM; L2 ~5.5 TB/s as measured by Chips and Cheese (2023)
    # dense tensor cores: 989 TFLOPS FP16, 1979 TOPS INT8. Warp-level mma.sync reaches about
    # 62 % of that (Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture", 2024), an estimate
    "h100": GpuDevice("h100", "sm_90", 1024, 48 * 1024, 16, 132, 67.0, 3350.0, 228 * 1024, 5500.0, 1.98,
                      989.0, 1979.0, 0.62),
    # NVIDIA H200 SXM datasheet: the H100's GH100 (132 SMs, 67 TFLOPS FP32, the same tensor cores, 1.98 GHz)
    # with 4.8 TB/s HBM3e; L2 as the H100's (an estimate)
    "h200": GpuDevice("h200", "sm_90", 1024, 48 * 1024, 16, 132, 67.0, 4800.0, 228 * 1024, 5500.0, 1.98,
                      989.0, 1979.0, 0.62),
    # NVIDIA A100 SXM4 80 GB datasheet: 108 SMs, 19.5 TFLOPS FP32, 312 TFLOPS FP16 and 624 TOPS INT8 dense
    # tensor cores, 2039 GB/s HBM2e, 1.41 GHz; 164 KB shared memory per SM; L2 ~4 TB/s (an
    # estimate)
    "a100": GpuDevice("a100", "sm_80", 1024, 48 * 1024, 16, 108, 19.5, 2039.0, 164 * 1024, 4000.0, 1.41,
                      312.0, 624.0),
    # NVIDIA V100 SXM2 datasheet: 80 SMs, 15.7 TFLOPS FP32, 900 GB/s HBM2, 1.53 GHz; 96 KB shared memory per
    # SM; L2 ~2.1 TB/s (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018)
    # 125 TFLOPS FP16 tensor cores; INT8 tensor cores came with Turing (sm_75), not Volta
    "v100": GpuDevice("v100", "sm_70", 1024, 48 * 1024, 16, 80, 15.7, 900.0, 96 * 1024, 2100.0, 1.53, 125.0),
}


def get_device(name: str) -> GpuDevice:
    try:
        return DEVICES[name.lower()]
    except KeyError:
        raise HeteroDSEError(f"unknown GPU {name!r}; known: {', '.join(DEVICES)}") from None


DEFAULT_CUDA_HOME = "/usr/local/cuda"  # where TVM looks when nvcc is not on PATH


def present_gpu() -> GpuDevice | None:
    """The CUDA device of this machine, or None: its own limits from the driver, the peaks of the named
    device it is (``NVIDIA H200``: the h200's), else of the first of its architecture, else the H100's (the
    peaks only matter to the estimate)."""
    import tvm

    dev = tvm.cuda(0)
    if not dev.exist:
        return None
    arch = "sm_" + str(dev.compute_version).replace(".", "")
    name = str(dev.device_name)
    # "NVIDIA H200", "NVIDIA A100-SXM4-80GB": the named device; "NVIDIA GH200 480GB" is not an h200 (its memory
    # differs), nor takes its peaks. An "H200 NVL" takes the SXM part's, a little above its own.
    words = re.split(r"[^a-z0-9]+", name.lower())
    known = next((d for d in DEVICES.values() if d.name in words), None) or next(
        (d for d in DEVICES.values() if d.arch == arch), DEVICES["h100"])
    return replace(known, name=name, arch=arch, max_threads_per_block=int(dev.max_threads_per_block),
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



@functools.cache
def nvcc_architectures(nvcc: str) -> tuple[str, ...]:
    """The sm_XY architectures ``nvcc`` compiles for (``--list-gpu-arch``; empty where it cannot say)."""
    import subprocess

    try:
        run = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(word.replace("compute_", "sm_") for word in run.stdout.split() if word.startswith("compute_"))


def check_architecture(device: GpuDevice) -> None:
    """A clear error when this machine's nvcc cannot compile for ``device`` (CUDA 13 dropped Volta, sm_70)."""
    nvcc = cuda_toolkit()
    known = nvcc_architectures(nvcc)
    if known and device.arch not in known:
        raise HeteroDSEError(f"the nvcc here ({nvcc}) does not compile for {device.arch} ({device.name}): it knows "
                             f"{', '.join(known)}; choose another --gpu or install a CUDA toolkit that has it")
