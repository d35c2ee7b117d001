"""GPU devices the schedules are generated for: the limits checked before building and the peaks used
by the roofline estimate when no GPU is present. Figures from the vendors' datasheets."""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def target(self) -> dict[str, str]:
        return {"kind": "cuda", "arch": self.arch}


DEVICES = {
    # NVIDIA H100 SXM5 datasheet: 132 SMs, 67 TFLOPS FP32, 3.35 TB/s HBM3; 48 KB static shared memory per block
    "h100": GpuDevice("h100", "sm_90", 1024, 48 * 1024, 16, 132, 67.0, 3350.0),
    # NVIDIA V100 SXM2 datasheet: 80 SMs, 15.7 TFLOPS FP32, 900 GB/s HBM2
    "v100": GpuDevice("v100", "sm_70", 1024, 48 * 1024, 16, 80, 15.7, 900.0),
}


def get_device(name: str) -> GpuDevice:
    try:
        return DEVICES[name.lower()]
    except KeyError:
        raise HeteroDSEError(f"unknown GPU {name!r}; known: {', '.join(DEVICES)}") from None
