"""Persistent back-to-back GEMM fusion on the GPU (Bolt; issue 22): the fused kernel computed on TVM's CPU
path against the unfused pair of built-in GEMMs, its CUDA compiled by nvcc with T only in shared memory, its
roofline by hand, and the choice between it and the pair."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from cost_models.gpu_roofline import LAUNCH_S
from gpu_cpu.b2b import (FUSE_MARGIN, FusedChoice, GemmPair, apply_b2b, choose, estimate_b2b, fused_points, limits,
                         violations)
from gpu_cpu.b2b_measure import FusedTrial, build_emulated
from gpu_cpu.cuda_usage import declared_shared_bytes
from gpu_cpu.measure import Measurer
from gpu_cpu.schedule import ScheduleError, build_cpu, build_cuda
from hetero_dse.epilogue import fuse
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.gpus import get_device
from hetero_dse.ops import get_builtin
from hetero_dse.reference import run_naive
from hetero_dse.space.point import Point

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="CUDA code generation needs nvcc")


def run_fused(pair: GemmPair, point: Point, inputs: list[np.ndarray]) -> np.ndarray:
    import tvm

    executable = build_cpu(apply_b2b(pair, point, emulate=True))
    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros(pair.output_shape, "float32"), dev)
    executable(*(tvm.runtime.tensor(a, dev) for a in inputs), out)
    return out.numpy()


MOBILENET_LIKE = GemmPair(96, 40, 24, 36, ("bias", "add", "relu6"), ("bias", "leaky_relu(0.1)"))
#: the same as two 1×1 convolutions in NCHW: channels are rows, pixels columns
NCHW = GemmPair(96, 40, 24, 36, ("bias", "add", "relu6"), ("bias", "leaky_relu(0.1)"), channels_first=True)


@pytest.mark.parametrize("pair", [GemmPair(96, 40, 24, 36), GemmPair(33, 16, 32, 64, first=()), MOBILENET_LIKE,
                                  NCHW, GemmPair(33, 16, 32, 64, first=(), channels_first=True)],
                         ids=["relu", "no activation, odd M", "bias, residual and an activation on both",
                              "1x1 convolutions, channels first", "channels first, odd M"])
def test_the_fused_kernel_computes_what_the_unfused_pair_does(pair):
    """Where there is no GPU: the same fusion (the block's rows of T computed inside it, A staged, each thread's
    accumulators, each GEMM's epilogue in its write-back) on TVM's CPU path, against the two built-in GEMMs with
    their epilogues run one after the other."""
    inputs = pair.random_inputs(3)
    first, second = pair.unfused()
    first_inputs, second_extras, b1 = pair.split_inputs(inputs)

    def shaped(op, arrays):  # the operators' own shapes: a 1×1 convolution's [1, C, 1, M] is A's [C, M]
        return [a.reshape([int(d) for d in t.shape]) for a, t in zip(arrays, op.inputs, strict=True)]

    t = run_naive(first, shaped(first, first_inputs))
    unfused = run_naive(second, shaped(second, [t, b1, *second_extras])).reshape(pair.output_shape)
    np.testing.assert_allclose(unfused, pair.reference(inputs), rtol=1e-5, atol=1e-5)
    points = fused_points(pair, get_device("h100"))
    assert points
    for point in (points[0], points[len(points) // 2], points[-1]):
        np.testing.assert_allclose(run_fused(pair, point, inputs), unfused, rtol=1e-5, atol=1e-5)


def test_a_point_whose_tiles_do_not_divide_the_pair_is_refused():
    """Ragged tiles stage rows past the matrix (TVM's regions ignore the tail's predicate): never a point."""
    pair, dev = GemmPair(33, 16, 20, 7), get_device("h100")
    ragged = Point({"rows": 8, "threads": 64, "regs": 2})
    problems = violations(pair, ragged, dev)
    assert "8 rows per block do not divide M = 33" in problems
    assert "64 threads × 2 outputs do not divide 8 rows × N0 = 20" in problems
    assert ragged not in fused_points(pair, dev)
    with pytest.raises(ScheduleError, match="no point of the fused template"):
        apply_b2b(pair, ragged)
    # with M = 33 only one row per block divides it, and with N0 = 20 no warp's outputs divide a row: the
    # pair has no fused point at all, it stays two kernels
    assert not fused_points(pair, dev)
    assert fused_points(GemmPair(33, 16, 32, 64), dev) == [Point({"rows": 1, "threads": 32, "regs": 1})]


@needs_nvcc
@pytest.mark.parametrize("arch", ["a100", "h100"])
@pytest.mark.parametrize("pair,rows", [(GemmPair(96, 40, 24, 36), 8), (GemmPair(33, 16, 32, 64), 1),
                                       (MOBILENET_LIKE, 8), (NCHW, 32)],
                         ids=["8 rows a block", "one row a block", "epilogues", "channels first"])
# (one row: A's staging has no row loop)
def test_the_fused_kernel_keeps_t_in_shared_memory_and_compiles(arch, pair, rows, tmp_path):
    device = get_device(arch)
    _, source = build_cuda(apply_b2b(pair, Point({"rows": rows, "threads": 32, "regs": 1})), device)
    assert len(set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source))) == 1
    signature = source[source.index("main_kernel("): source.index(")", source.index("main_kernel("))]
    # one launch reading A, B0, B1 (and the epilogues' biases and residual) and writing O: the intermediate is
    # no argument, it lives in shared memory
    extras = ["O_bias", "T_bias", "T_residual1"] if pair.second else []
    assert re.findall(r"(\w+)_ptr", signature) == ["A", "B0", "B1", "O", *extras]
    # T written from the first GEMM's accumulators, through its epilogue, into a shared array (TVM may reuse A's
    # staging buffer for it once A is read)
    (t_array,) = set(re.findall(r"(\w+)\[[^\]]*\] = [^;]*S_local_ptr\[0\]", source)) - {"S_local_ptr"}
    assert re.search(rf"__shared__ [^;]* {t_array}\[\d+\]", source)
    # the kernel declares at most the shared memory the space counts (a block's rows of A and of T; TVM may put
    # T where A was): in either layout A's rows are what is staged, never a weight matrix
    point = Point({"rows": rows, "threads": 32, "regs": 1})
    assert declared_shared_bytes(source) <= limits(pair, point)["shared_bytes"]
    assert not re.search(r"__shared__ [^;]* B[01]_shared", source)
    cu = tmp_path / "b2b.cu"
    cu.write_text(source)
    run = subprocess.run(["nvcc", f"-arch={device.arch}", "-cubin", "-o", str(tmp_path / "b2b.cubin"), str(cu)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_fused_roofline_by_hand():
    pair, dev = GemmPair(3136, 64, 64, 64), get_device("h100")
    p = Point({"rows": 32, "threads": 256, "regs": 4})
    est = estimate_b2b(pair, p, dev)
    f = est.figures
    assert f["blocks"] == 98 and f["shared_bytes"] == 32 * (64 + 64) * 4
    # every block reads both weight matrices through L2, and A once
    assert f["l2_bytes"] == 98 * (64 * 64 + 64 * 64) * 4 + 3136 * 64 * 4
    # DRAM: A, B0, B1 and O once; T never leaves the chip
    assert f["dram_s"] == pytest.approx((3136 * 64 * 2 + 64 * 64 * 2) * 4 / 3350e9)
    assert est.seconds == pytest.approx(LAUNCH_S + max(f[k] for k in ("compute_s", "dram_s", "l2_s", "shared_s")))
    # epilogues: a bias per column of T and of O read by every block, T's residual once, by its rows' block
    epilogues = GemmPair(3136, 64, 64, 64, ("bias", "add", "relu"), ("bias", "relu6"))
    assert epilogues.epilogue_reads() == ((64 + 64) * 4, 3136 * 64 * 4)
    g = estimate_b2b(epilogues, p, dev).figures
    assert g["l2_bytes"] == 98 * (64 * 64 + 64 * 64 + 64 + 64) * 4 + 3136 * 64 * 4 + 3136 * 64 * 4
    assert g["dram_s"] == pytest.approx((3136 * 64 * 3 + 64 * 64 * 2 + 64 + 64) * 4 / 3350e9)
    # a block's rows of A and T beyond the block's shared memory are never points of the space
    wide = GemmPair(1, 50176, 4096, 1470)
    assert not fused_points(wide, dev)
    assert "shared memory" in violations(wide, Point({"rows": 1, "threads": 32, "regs": 1}), dev)[0]


def test_fusion_is_chosen_only_when_its_estimate_beats_the_pair_by_the_margin_its_optimism_asks():
    """Where nothing is measured the fused kernel must be estimated ``FUSE_MARGIN`` times faster than the two
    layers: an H200 measured it 2.00x its estimate where it measured the layers 1.17x theirs."""
    assert FUSE_MARGIN == pytest.approx(2.00 / 1.17)
    dev = get_device("h100")
    small_n0 = GemmPair(3136, 64, 64, 64)  # a 56×56 pair of 1×1 convolutions: two launches of tiny GEMMs
    chosen = choose(small_n0, (3.77e-6, 3.77e-6), dev)
    assert isinstance(chosen, FusedChoice) and chosen.fuse and chosen.point is not None
    assert chosen.speedup == pytest.approx(2 * 3.77e-6 / chosen.fused.seconds) and chosen.speedup > FUSE_MARGIN
    fused_s = chosen.fused.seconds
    # faster than the two layers by the estimate, but by less than its optimism: two kernels
    short = choose(small_n0, (0.8 * fused_s, 0.8 * fused_s), dev)
    assert short.speedup == pytest.approx(1.6) and not short.fuse
    assert choose(small_n0, (FUSE_MARGIN / 2 * fused_s,) * 2, dev).fuse
    assert not choose(small_n0, (1e-7, 1e-7), dev).fuse
    # a batch-1 classifier's two layers: a row of A alone exceeds the shared memory, nothing to fuse
    fc = choose(GemmPair(1, 50176, 4096, 1470), (2.5e-4, 1.1e-5), dev)
    assert fc.point is None and not fc.fuse and fc.speedup is None


def test_a_pair_is_read_from_two_gemms_or_refused_in_one_sentence():
    gemm = get_builtin("gemm")
    first, second = GemmPair(64, 32, 48, 40).unfused()
    assert GemmPair.of(first, second) == GemmPair(64, 32, 48, 40, ("relu",), ())
    assert GemmPair.of(*MOBILENET_LIKE.unfused()) == MOBILENET_LIKE  # the epilogues read from the operators
    with pytest.raises(HeteroDSEError, match="not an epilogue step"):
        GemmPair(64, 32, 48, 40, ("gelu",))
    with pytest.raises(HeteroDSEError, match="does not multiply"):
        GemmPair.of(first, gemm.instantiate({"M": 64, "N": 40, "K": 50}))
    with pytest.raises(HeteroDSEError, match="not two float32 GEMMs"):
        GemmPair.of(first, gemm.instantiate({"M": 64, "N": 40, "K": 48, "dtype": "float16"}))


def test_two_pointwise_convolutions_are_a_channels_first_pair():
    """Two 1×1 convolutions in NCHW are the pair with channels as rows (their tensors as the network holds them);
    a 3×3 one is refused in one sentence: the fused kernel gathers no windows."""
    conv = get_builtin("conv2d")
    base = {"batch": 1, "H": 8, "W": 12, "kernel": 1, "stride": 1, "padding": 0}
    first = fuse(conv.instantiate({**base, "C": 40, "K": 24}), ("bias", "relu6"), (1,))
    second = fuse(conv.instantiate({**base, "C": 24, "K": 36}), ("bias",), (1,))
    pair = GemmPair.of(first, second)
    assert pair == GemmPair(96, 40, 24, 36, ("bias", "relu6"), ("bias",), channels_first=True)
    # the fused kernel on the convolutions' own tensors, reshaped (the same memory): I [1, 40, 8, 12] is A [40, 96]
    inputs = [x for op in (first, second) for x in op.random_inputs(7)]
    i, w0, bias0, t_placeholder, w1, bias1 = inputs
    t = run_naive(first, [i, w0, bias0])
    want = run_naive(second, [t, w1, bias1])
    fused_inputs = [i.reshape(40, 96), w0.reshape(24, 40), bias0, w1.reshape(36, 24), bias1]
    point = fused_points(pair, get_device("h100"))[0]
    np.testing.assert_allclose(run_fused(pair, point, fused_inputs), want.reshape(36, 96), rtol=1e-5, atol=1e-5)
    three = conv.instantiate({**base, "C": 24, "K": 36, "kernel": 3, "padding": 1})
    with pytest.raises(HeteroDSEError, match="not two 1×1 convolutions"):
        GemmPair.of(first, three)


@needs_nvcc
def test_a_networks_back_to_back_pointwise_convolutions_are_fused_where_faster(write, cli, tmp_path):
    """explore --model on the GPU (estimates): a pair like MobileNet-V2's (a 1×1 projection to 16 channels, then
    an expansion, here to 32, on 56×56 pixels) becomes one kernel, its estimate 1.96x the two layers' (clear of
    ``FUSE_MARGIN``), checked against the unfused pair and written; the plan counts it once instead of its two
    layers. A 3×3 convolution after it pairs with nothing."""
    path = write("net.py", """
        import torch
        from torch import nn

        def model():
            return nn.Sequential(nn.Conv2d(32, 16, 1, bias=False), nn.BatchNorm2d(16),
                                 nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(),
                                 nn.Conv2d(32, 8, 3, padding=1))

        def example_input():
            return torch.randn(1, 32, 56, 56)
    """)
    out = tmp_path / "o"
    r = cli("explore", "--model", path, "--target", "gpu", "--gpu", "h100", "--budget", "200", "--no-history",
            "--out", out)
    assert r.code == 0, r.err
    assert "h100 (estimate): 1 of 1 back-to-back 1×1 convolution pairs fused" in r.out
    report = json.loads((out / "report.json").read_text())
    (fusion,) = report["model"]["b2b"]
    assert (fusion["first"], fusion["second"], fusion["count"]) == ("net:L1", "net:L2", 1)
    assert fusion["shape"] == {"M": 56 * 56, "K": 32, "N0": 16, "N1": 32}
    rows = {row["shape"]: row["seconds"] for row in report["rows"]}
    assert fusion["unfused_s"] == pytest.approx([rows["net:L1"], rows["net:L2"]])
    # booked as an H200 measured such estimates to be, on the layers' estimates' scale
    assert fusion["fused_s"] == pytest.approx(fusion["estimate_s"] * FUSE_MARGIN)
    assert fusion["fuse"] and fusion["checked"] and fusion["speedup"] > 1
    record = json.loads((out / fusion["directory"] / "b2b.json").read_text())
    assert record["checked_on_cpu_path"] and not record["checked_on_gpu"] and record["pair"]["channels_first"]
    assert record["booked_s"] == fusion["fused_s"] and record["estimate_s"] == fusion["estimate_s"]
    assert record["pair"]["first"] == ["bias"] and record["pair"]["second"] == ["bias", "relu6"]
    source = (out / fusion["directory"] / "kernel.cu").read_text()
    assert set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source)) == {"main_kernel"}
    (device,) = report["model"]["devices"]
    by_hand = sum(rows.values()) - (sum(fusion["unfused_s"]) - fusion["fused_s"])
    assert device["plan_s"] == pytest.approx(by_hand)
    (planned,) = json.loads((out / "plan.json").read_text())["devices"][0]["fused"]
    assert planned == {"layers": ["net:L1", "net:L2"], "count": 1, "module": fusion["directory"],
                       "seconds": fusion["fused_s"]}
    assert "net:L1 → net:L2 | 1 | 3136 × 32 → 16 → 32" in (out / "report.md").read_text()


# ------------------------------------------------------------------------- the fused kernel measured (on a GPU)
def test_the_fused_template_is_measured_best_estimate_first_and_each_point_checked():
    """``measure_fused`` on TVM's CPU path (the GPU's path but for the build and the device): the points come in
    the roofline's order, each checked against the pair's reference before it is timed; a kernel that computes
    another pair (no activation after the first GEMM) fails every point with its error, untimed."""
    import tvm

    from gpu_cpu.b2b_measure import fastest_fused, measure_fused, ranked_points

    h100 = get_device("h100")
    ranked = ranked_points(NCHW, h100)
    assert [s for _, s in ranked] == sorted(estimate_b2b(NCHW, p, h100).seconds for p in fused_points(NCHW, h100))
    trials = measure_fused(NCHW, h100, 3, dev=tvm.cpu(0), build=build_emulated(NCHW), target="llvm")
    assert [t.point for t in trials] == [p for p, _ in ranked[:3]]
    assert all(t.error is None and t.seconds > 0 and len(t.repeats) == 3 for t in trials)
    assert fastest_fused(trials).seconds == min(t.seconds for t in trials)
    other = GemmPair(96, 40, 24, 36, ("bias", "add"), ("bias", "leaky_relu(0.1)"), channels_first=True)
    wrong = measure_fused(NCHW, h100, 2, dev=tvm.cpu(0), build=build_emulated(other), target="llvm")
    assert all(t.seconds is None and "differs from the reference of the pair" in t.error for t in wrong)
    assert fastest_fused(wrong) is None


def test_a_fused_kernel_that_writes_nothing_fails_its_check_though_the_point_before_it_passed():
    """The output is set to NaN before every point: a kernel that writes nothing would otherwise find the last
    point's correct result there and pass."""
    import tvm

    from gpu_cpu.b2b_measure import measure_fused

    class Silent:
        """A test double of a built module whose kernel returns without writing."""

        entry_name = "main"

        def __getitem__(self, name):
            return lambda *args: None

        def time_evaluator(self, *args, **kwargs):
            raise AssertionError("a kernel that failed its check is timed")

    real = build_emulated(NCHW)
    builds = iter([real, lambda point: Silent()])
    trials = measure_fused(NCHW, get_device("h100"), 2, dev=tvm.cpu(0), build=lambda p: next(builds)(p),
                           target="llvm")
    assert trials[0].error is None
    assert trials[1].seconds is None and "some outputs unwritten" in trials[1].error


def test_a_fused_point_that_hangs_or_crashes_is_a_failed_trial_and_the_next_point_is_measured():
    """With a ``Measurer`` each point of the fused template runs in its worker process: one that hangs is cut off at
    the timeout, one that kills its process (a fault on the device) takes only its worker; each is a trial with its
    error, and the next point is built, checked and timed in a fresh worker (TVM's CPU path standing in for the
    GPU). The doubles (``fused_doubles``) replace the job for those two points only."""
    from fused_doubles import hangs_then_crashes

    from gpu_cpu.b2b_measure import fused_point_job, measure_fused

    class Faulty(Measurer):
        """The real worker and timeout, the job swapped for the double."""

        def run(self, job, payload):
            assert job is fused_point_job
            return super().run(hangs_then_crashes, payload)

    with Faulty(timeout_s=12) as measurer:
        hung, crashed, ran = measure_fused(NCHW, get_device("h100"), 3, target="llvm", measurer=measurer)
    assert hung.seconds is None and hung.error == "timed out after 12 s"
    assert crashed.seconds is None and "crashed its worker process" in crashed.error
    assert ran.error is None and ran.seconds > 0 and len(ran.repeats) == 3


def test_where_a_gpu_measures_the_pair_is_fused_by_the_fused_kernels_measured_time(monkeypatch, tmp_path):
    """``back_to_back`` with the layers measured on a GPU: the fused template's points are measured (here on the
    CPU path, the stand-in for the GPU's timing) and the pair fused only where the fastest beats the two layers'
    measured sum; the record says it was checked where it ran and holds the measured seconds."""
    import functools
    from types import SimpleNamespace


    from gpu_cpu import b2b_measure
    from hetero_dse.targets import gpu_fusion

    pair = GemmPair(96, 40, 24, 36, ("bias",), ("bias", "relu6"), channels_first=True)
    first, second = pair.unfused()
    calls = []

    def on_cpu(p, gpu, trials=None, measurer=None):
        calls.append(trials)
        assert isinstance(measurer, Measurer)  # each point in a worker process, cut off at its timeout
        return b2b_measure.measure_fused(p, gpu, 2, target="llvm", measurer=measurer)

    monkeypatch.setattr(gpu_fusion, "measure_fused", on_cpu)
    graph = SimpleNamespace(pairs=[SimpleNamespace(first=0, second=1, count=2)], operators=lambda: [first, second])
    h100 = get_device("h100")
    run = functools.partial(gpu_fusion.back_to_back, graph, gpu=h100, device="h100", typed=lambda op: op,
                            on_gpu=True)

    def layers(seconds):
        return [SimpleNamespace(op=op, found=True, best_seconds=seconds) for op in (first, second)]

    (slow_layers,) = run(layers(1.0), out=tmp_path / "a")
    assert calls == [None]  # every point of the template
    assert slow_layers["fuse"] and slow_layers["measured"] and slow_layers["fused_s"] < 1e-2
    record = json.loads((tmp_path / "a" / slow_layers["directory"] / "b2b.json").read_text())
    assert record["checked_on_gpu"] and record["measured_s"] == slow_layers["fused_s"] and len(record["repeats"]) == 3
    assert record["estimate_s"] == pytest.approx(estimate_b2b(pair, Point(record["point"]), h100).seconds)
    (fast_layers,) = run(layers(1e-9), out=tmp_path / "b")
    assert not fast_layers["fuse"] and fast_layers["why"] == "the two layers' kernels are faster (measured)"
    # a fused median below the layers' sum by less than its repeats' spread is not fused: its slowest repeat must win
    repeats = (1.0e-3, 1.1e-3, 1.3e-3)
    spread = [FusedTrial(Point(fused_points(pair, h100)[0]), 1e-4, repeats[1], repeats=repeats)]
    monkeypatch.setattr(gpu_fusion, "measure_fused", lambda *args, **kwargs: spread)
    (close,) = run(layers(0.6e-3), out=tmp_path / "c")  # the sum 1.2 ms: above the median, below the slowest
    assert not close["fuse"] and "by less than its repeats spread" in close["why"]
    (clear,) = run(layers(0.7e-3), out=tmp_path / "d")  # 1.4 ms: every repeat wins
    assert clear["fuse"] and clear["fused_s"] == repeats[1]
    assert not (tmp_path / "b").exists()


def test_the_fused_kernels_measured_over_estimated_seconds_are_what_the_model_gives_today():
    """``FUSED_MEASURED_OVER_ESTIMATE`` and ``LAYERS_MEASURED_OVER_ESTIMATE`` recomputed: the H200's seconds
    (bench/data/gpu_b2b_h200.json) over today's roofline on the H200, for the fused kernel at the point the
    roofline ranks first and for the two layers' best estimated schedules (each searched as bench/gpu_b2b.py
    does); and what ``FUSE_MARGIN``'s comment says it decides on those pairs."""
    import math
    from pathlib import Path

    from gpu_cpu.b2b import FUSED_MEASURED_OVER_ESTIMATE, LAYERS_MEASURED_OVER_ESTIMATE, best_fused
    from hetero_dse.targets.flow import explore
    from hetero_dse.targets.gpu import GpuTarget

    def summary(ratios):
        return (round(min(ratios), 2), round(max(ratios), 2),
                round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 2))

    root = Path(__file__).resolve().parents[1]
    measured = json.loads((root / "bench" / "data" / "gpu_b2b_h200.json").read_text())
    h200 = get_device("h200")
    fused, layers, decided = [], [], {}
    for row in measured["rows"]:
        pair = GemmPair(row["M"], row["K"], row["N0"], row["N1"], tuple(row["first"]), tuple(row["second"]))
        point, estimate = best_fused(pair, h200)
        (seconds,) = [t["seconds"] for t in row["fused_trials"] if t["point"] == dict(point)]
        fused.append(seconds / estimate.seconds)
        unfused = [explore(op, GpuTarget("h200", trials=64), "sa").best_seconds for op in pair.unfused()]
        layers += [layer["seconds"] / s for layer, s in zip(row["layers"], unfused, strict=True)]
        decided[row["pair"]] = (choose(pair, tuple(unfused), h200).fuse, round(row["unfused_s"] / seconds, 2))
    assert summary(fused) == FUSED_MEASURED_OVER_ESTIMATE
    assert summary(layers) == LAYERS_MEASURED_OVER_ESTIMATE
    assert decided == {"1x1 pair 56x56 64-64-64": (True, 1.34), "1x1 pair 14x14 256-64-256": (False, 0.84),
                       "MobileNet-V2 blocks 0-1 112x112 32-16-96": (True, 1.02),
                       "MobileNet-V2 blocks 2-3 56x56 144-24-144": (False, 0.70),
                       "MLP 4096 tokens 768-64-768": (False, 0.38)}


def test_without_a_gpu_the_fused_kernel_is_booked_as_an_h200_measured_its_estimates(monkeypatch, tmp_path):
    """The layers measured on a remote GPU and the fused kernel only estimated: its estimate is booked times
    ``FUSED_MEASURED_OVER_ESTIMATE`` (against measured layers), not ``FUSE_MARGIN`` (against estimated ones); and a
    fused kernel that cannot be measured where a GPU is leaves the pair as two kernels, saying why."""
    from types import SimpleNamespace

    from gpu_cpu.b2b import FUSED_MEASURED_OVER_ESTIMATE
    from hetero_dse.targets import gpu_fusion

    pair = GemmPair(96, 40, 24, 36, ("bias",), ("bias", "relu6"), channels_first=True)
    first, second = pair.unfused()
    graph = SimpleNamespace(pairs=[SimpleNamespace(first=0, second=1, count=1)], operators=lambda: [first, second])
    layers = [SimpleNamespace(op=op, found=True, best_seconds=1.0) for op in (first, second)]
    h100 = get_device("h100")
    (remote,) = gpu_fusion.back_to_back(graph, layers, tmp_path / "a", h100, "h100", lambda op: op, on_gpu=False,
                                        layers_measured=True)
    assert remote["fused_s"] == pytest.approx(remote["estimate_s"] * FUSED_MEASURED_OVER_ESTIMATE[2])
    (estimated,) = gpu_fusion.back_to_back(graph, layers, tmp_path / "b", h100, "h100", lambda op: op, on_gpu=False)
    assert estimated["fused_s"] == pytest.approx(estimated["estimate_s"] * FUSE_MARGIN)

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA: an illegal memory access was encountered")

    monkeypatch.setattr(gpu_fusion, "measure_fused", broken)
    (failed,) = gpu_fusion.back_to_back(graph, layers, tmp_path / "c", h100, "h100", lambda op: op, on_gpu=True)
    assert not failed["fuse"] and failed["why"] == ("the fused kernel could not be measured on the GPU (RuntimeError: "
                                                    "CUDA: an illegal memory access was encountered)")
