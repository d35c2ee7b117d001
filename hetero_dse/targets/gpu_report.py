"""What the GPU target puts in the report: its row (the arithmetic it computes with, the bound of an estimate),
its record in report.json, and the footnote saying how its figures were obtained. An estimate's occupancy
comes from the registers ptxas gives the written kernel, counted once per operator and point."""

from __future__ import annotations

from typing import Any, Protocol

from cost_models.gpu_roofline import ESTIMATE_OVER_H100, ESTIMATE_OVER_H200, GpuEstimate
from gpu_cpu.cuda_usage import ptxas_usage
from gpu_cpu.schedule import ScheduleError, apply_gpu, build_cuda
from gpu_cpu.winograd import TILE_KNOB, algorithm_name, product_point
from gpu_cpu.winograd_gpu import whole_estimate
from hetero_dse.evaluate.estimate import Roofline
from hetero_dse.hardware.gpus import GpuDevice
from hetero_dse.operator import Operator
from hetero_dse.space.point import Point
from hetero_dse.space.tensorcore import ARITHMETIC
from hetero_dse.targets.base import Row, Searched, Written
from hetero_dse.targets.tuned import Tuned, timing_note

__all__ = ["PtxasRegisters", "ReportedGpu", "estimate_of", "gpu_footnote", "gpu_record", "gpu_row",
           "winograd_estimate"]


class PtxasRegisters:
    """The registers ptxas gives a thread of a point's kernel on ``device``; None where nvcc is missing or
    refuses it. Kept per operator and point: the row and the record of one result both ask, and each answer
    costs a schedule, a build and (once per source) ptxas."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.counts: dict[tuple[Operator, Point], int | None] = {}

    def __call__(self, op: Operator, point: Point) -> int | None:
        key = (op, point)
        if key not in self.counts:
            try:
                _, source = build_cuda(apply_gpu(op, point), self.device, compile_here=False)
            except ScheduleError:
                self.counts[key] = None
            else:
                usage = ptxas_usage(source, self.device.arch)
                self.counts[key] = usage["registers"] if usage else None
        return self.counts[key]


class ReportedGpu(Protocol):
    """What the report asks of the GPU target."""

    gpu: GpuDevice
    device: str
    remote: Any
    measured: bool
    registers: PtxasRegisters

    def off_tensor_cores(self, op: Operator) -> str | None: ...

    def roofline(self, op: Operator) -> Roofline: ...


def estimate_of(target: ReportedGpu, t: Tuned) -> GpuEstimate | None:
    """The row's estimate, its occupancy from the registers ptxas gives the written kernel (the model counts
    accumulators plus a constant; an unrolled kernel takes several times that: 64-254 against 30-60 on
    YOLO-v1's layers, which moved none of their estimates, a block of four warps keeping an SM's schedulers
    busy in the model either way)."""
    if t.best is None or not t.estimate:
        return None
    if TILE_KNOB in t.best:
        label = algorithm_name(int(t.best[TILE_KNOB]))
        searched = next(s for s in t.searched if s.alternative.label == label)
        return winograd_estimate(target, t.op, searched, product_point(t.best))
    return target.roofline(t.op)(t.space, t.best, target.registers(t.op, t.best))


def winograd_estimate(target: ReportedGpu, op: Operator, searched: Searched, point: Point) -> GpuEstimate:
    """The roofline of ``op`` by Winograd, its product at ``point`` (of ``searched``'s space): the product's
    estimate (its occupancy from ptxas's registers, as any row's) and the two transform kernels' (their reads,
    writes and sums counted from the code, ``transform_kernels``), one after the other."""
    product = searched.alternative.op
    estimate = target.roofline(product)(searched.space, point, target.registers(product, point))
    return whole_estimate(target.gpu, op, int(searched.alternative.point_of(point)[TILE_KNOB]), estimate)


def arithmetic(target: ReportedGpu, op: Operator, point: Point | None = None) -> str:
    """What the row's kernel computes with: the tensor cores' instruction (the best point's, where there is
    one), or the SIMT cores and why."""
    why = target.off_tensor_cores(op)
    if why is None:
        kind = ARITHMETIC[op.dtype]
        instruction = point["mma"] if point is not None and "mma" in point else kind.instruction
        return f"{op.dtype} tensor cores ({instruction}), {kind.accumulator} accumulation"
    return f"{op.dtype} SIMT ({why})"


def peak(target: ReportedGpu, op: Operator) -> float:
    """The device's peak for the row's arithmetic (FLOP/s)."""
    on_tensor_cores = target.off_tensor_cores(op) is None
    return (target.gpu.tensor_tflops(op.dtype) if on_tensor_cores else target.gpu.fp32_tflops) * 1e12


def gpu_row(target: ReportedGpu, t: Tuned, written: Written | None) -> Row:
    figures = estimate_of(target, t)
    detail = arithmetic(target, t.op, t.best)
    if t.algorithm is not None:  # named where another algorithm was searched
        detail = f"{t.algorithm}; {detail}"
    if figures is not None and figures.figures.get("padding_overhead", 1) > 1:
        detail += f"; padded to the tile: {figures.figures['padding_overhead']:.2f}x the multiply-adds"
    if not t.estimate and t.best is not None:
        detail += "; " + timing_note(t.retimed or t.best_trial.result, t.library)
    return t.row("gpu", target.device, peak(target, t.op), written, bound=figures.bound if figures else None,
                 detail=detail)


def gpu_record(target: ReportedGpu, t: Tuned, written: Written | None) -> dict[str, Any]:
    out = {**t.record(written), "device": target.gpu.name, "target": target.gpu.target,
           "arithmetic": arithmetic(target, t.op, t.best)}
    figures = estimate_of(target, t)
    if figures is not None:
        out["best"]["bound"] = figures.bound
        out["best"]["figures"] = figures.figures
    return out


def gpu_footnote(target: ReportedGpu) -> str:
    gpu = target.gpu
    if target.remote is not None:
        return (f"GPU over TVM's RPC: each schedule was built here for {gpu.arch} and checked and timed on "
                f"{target.remote}; torch does not run through RPC, so there is no library figure.")
    if target.measured:
        return (f"GPU: {gpu.name} ({gpu.arch}), each schedule built, checked and timed in a worker process; "
                "torch (cuDNN) timed on the same device in the same run. A float32 3×3 stride-1 convolution is also "
                "searched by Winograd F(2×2, 3×3) and F(4×4, 3×3) (each tile's batched product), each algorithm's "
                "best then timed as the whole convolution one right after the other, and the fastest kept; its "
                "GFLOPS count direct convolution's FLOPs and it has no % peak.")
    checked = "; ".join(f"{dtype} {low:.2f}–{high:.2f}× (geometric mean {mean:.2f}×)"
                        for dtype, (low, high, mean) in ESTIMATE_OVER_H100.items())
    winograd_checked = "; ".join(f"{label} {low:.2f}–{high:.2f}× ({mean:.2f}×)"
                                 for label, (low, high, mean) in ESTIMATE_OVER_H200.items())
    return ("GPU estimates: no GPU on this machine. The time is the roofline model of the named device "
            "(`cost_models/gpu_roofline.py`: FP32 peak with issue, lane and FMA-latency losses; DRAM, L2 and "
            "shared-memory traffic), not a measurement; the CUDA source was generated and compiled by nvcc "
            "but not run, and no library baseline was taken. Checked against an H100 on the best points "
            f"measured there for YOLO-v1's layers, the estimate was this multiple of the measured speed: "
            f"{checked} (`bench/gpu_roofline_vs_measured.py`): mostly optimistic, and not the speed a "
            "kernel will reach. A float32 3×3 stride-1 convolution is also searched by Winograd F(2×2, 3×3) and "
            "F(4×4, 3×3) (each tile's batched product), its estimate the product's plus its two transform kernels' "
            "(`transform_kernels`: their sums, reads and writes counted from the code), and the fastest estimate "
            f"kept. Checked on the H200's roofline against an H200's measurements of each algorithm's best points "
            f"of four layers: {winograd_checked} "
            "(`bench/gpu_winograd_vs_measured.py`). Its GFLOPS count direct convolution's FLOPs and it has no % "
            "peak.")
