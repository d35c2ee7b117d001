"""Winograd on the GPU (issue 40): the three kernels computing the convolution (checked on TVM's CPU path, the
same loops serial, where there is no GPU), their CUDA compiled by nvcc, seed 001's §5.3 domain for the product
and the transform kernels' roofline by hand, and the choice ``explore --target gpu`` makes by the estimate."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from cost_models.gpu_roofline import LAUNCH_S, SECTOR_BYTES, TransformKernel, transform_seconds
from gpu_cpu.cuda_usage import declared_shared_bytes
from gpu_cpu.schedule import apply_gpu, build_cpu, build_cuda
from gpu_cpu.winograd import TILE_KNOB, product_operator, transform_weights, winograd_point, winograd_shape
from gpu_cpu.winograd_gpu import transform_kernels
from hetero_dse.analysis import analyze
from hetero_dse.epilogue import fuse
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.gpus import get_device
from hetero_dse.ops import get_builtin
from hetero_dse.ops.winograd import TOLERANCE
from hetero_dse.space.gpu import Dataflow, GpuSpace
from hetero_dse.space.point import Point
from hetero_dse.targets.gpu import GpuTarget

pytest.importorskip("tvm")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="CUDA code generation needs nvcc")
H100 = get_device("h100")


def _conv(**params):
    base = dict(C=8, K=16, H=10, W=10, kernel=3, stride=1, padding=1)
    return get_builtin("conv2d").instantiate({**base, **params})


def _product_space(op, m, domain=False):
    return GpuSpace(analyze(product_operator(winograd_shape(op, m))), H100, domain=domain,
                    dataflow=Dataflow.winograd(m))


def _emulated(op, point, seed=0):
    """The GPU module's output on TVM's CPU path (every loop serial, every buffer global), weights transformed."""
    import tvm

    inputs = op.random_inputs(seed)
    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros([int(d) for d in op.output.shape], "float32"), dev)
    given = [inputs[0], transform_weights(inputs[1], int(point[TILE_KNOB])), *inputs[2:]]
    build_cpu(apply_gpu(op, point, emulate=True))(*[tvm.runtime.tensor(np.ascontiguousarray(a), dev)
                                                    for a in given], out)
    want = op.reference(inputs)
    return float(np.abs(out.numpy() - want).max() / np.abs(want).max())


@pytest.mark.parametrize("m", [2, 4])
def test_each_tile_computes_the_convolution_with_its_epilogue_on_tvms_cpu_path(m):
    # 10×10 output: F(4×4) leaves a ragged last tile, not computed on the way out
    op = fuse(_conv(), ("bias", "add", "relu"), (1,))
    space = _product_space(op, m)
    for row in space.sample(2, np.random.default_rng(m)):
        assert _emulated(op, winograd_point(m, space.decode(row))) < TOLERANCE["float32"]


def test_without_padding_on_a_non_square_map_and_odd_channels():
    op = _conv(H=9, W=12, padding=0, C=5, K=7)
    space = _product_space(op, 2)
    (row,) = space.sample(1, np.random.default_rng(1))
    assert _emulated(op, winograd_point(2, space.decode(row))) < TOLERANCE["float32"]


@needs_nvcc
def test_the_cuda_has_three_kernels_nvcc_compiles_and_the_product_declares_the_spaces_shared_memory():
    op = fuse(_conv(C=32, K=64, H=14, W=14), ("bias", "relu"), (1,))
    space = _product_space(op, 4)
    (row,) = space.sample(1, np.random.default_rng(3))
    product = space.decode(row)
    _, source = build_cuda(apply_gpu(op, winograd_point(4, product)), H100)  # nvcc compiles it for sm_90
    kernels = re.findall(r'extern "C" __global__ void __launch_bounds__\((\d+)\) (\w+)\([^)]*\) \{', source)
    assert len(kernels) == 3
    # the transforms stage nothing: what the module declares is the product's stages, as its space counts them
    assert declared_shared_bytes(source) == space.limits(product)["shared_bytes"]
    assert [int(t) for t, _ in kernels][::2] == [128, 128]  # a transform: TRANSFORM_THREADS a block


@needs_nvcc
@pytest.mark.parametrize("m", [2, 4])
def test_the_transform_kernels_load_and_store_what_the_roofline_charges(m):
    """Counted in the CUDA itself (every access is unrolled: one text a load or store): the input transform
    loads its α×α patch of X once and stores α² points of V; the output transform loads α² sums of M once and
    stores m² outputs, reading a residual m² times. A kernel that reloaded X for every term of Bᵀ d (as one did,
    with the padded input inlined: 32 loads for F(2×2), 132 for F(4×4)) fails here."""
    op = fuse(_conv(C=32, K=64, H=14, W=14), ("bias", "add", "relu"), (1,))
    space = _product_space(op, m)
    (row,) = space.sample(1, np.random.default_rng(3))
    _, source = build_cuda(apply_gpu(op, winograd_point(m, space.decode(row))), H100)
    bodies = re.split(r'extern "C" __global__ void __launch_bounds__\(\d+\) \w+\([^)]*\) \{', source)[-3:]
    first, _, last = ({name: len(re.findall(rf"\b{name}_ptr\[", body)) for name in ("X", "V", "M", "E", "residual1")}
                      for body in bodies)
    kernels, a = transform_kernels(op, m), m + 2
    assert first["X"] == a * a == kernels["input_transform"].scattered_accesses / kernels["input_transform"].threads
    assert first["V"] == a * a == kernels["input_transform"].coalesced_bytes / 4 / kernels["input_transform"].threads
    out = kernels["output_transform"]
    assert last["M"] == a * a and last["E"] == last["residual1"] == m * m
    assert out.scattered_accesses / out.threads == last["E"] + last["residual1"]
    assert out.coalesced_bytes / 4 / out.threads == last["M"] + 1  # and the bias, once (one address a thread)


def test_seed_001_winograd_domain_by_hand():
    """§5.3: 2·α²/m²·x·y·z ≤ S_b and x·y = r²·z, taken as z ≤ √(S'/R) and x·y ≤ √(S'·R) with S' = S_b·m²/(2α²),
    R = r² = 9; x·y counts m² pixels a tile; the α² points of a tile stay in one block."""
    flow = Dataflow.winograd(4)
    assert (flow.output_loops, flow.channel_loops, flow.ratio, flow.pixels, flow.whole_loops) == (
        ("p",), ("k",), 9.0, 16, ("e",))
    assert flow.words_scale == pytest.approx(16 / 72)
    op = _conv(C=256, K=512, H=28, W=28)  # YOLO-v1 C8: 49 tiles of 4×4, 36 points
    space = _product_space(op, 4, domain=True)
    assert space.domain and all(f[0] == 1 for f in space.splits[space.loop_names.index("e")])
    words = (228 * 1024 // 2 // 4) * 16 / 72  # H100: half an SM's shared memory, in float32 words, times m²/(2α²)
    assert words == pytest.approx(6485.33, abs=0.01)
    # 7 tiles (112 pixels) × 16 channels a block: 1,792 ≤ S'; 16 ≤ √(S'/9) = 26.8; 112 ≤ √(9·S') = 241.6
    inside = Point({"split.e": (1, 1, 36, 1), "split.p": (7, 1, 1, 7), "split.k": (32, 2, 8, 1),
                    "split.c": (64, 2, 2), "unroll": 16})
    assert space.violations(inside) == []
    wide = Point({**inside, "split.k": (16, 4, 8, 1)})  # 32 channels a block
    assert "channel tile 32 > sqrt(S'/R) = 27" in space.violations(wide)
    split = Point({**inside, "split.e": (2, 1, 18, 1)})
    assert "loop e split across blocks (18 of its 36 a block)" in space.violations(split)
    # direct convolution keeps §5.2's dataflow, from its window
    direct = Dataflow.direct(analyze(op))
    assert (direct.output_loops, direct.channel_loops, direct.ratio, direct.pixels) == (("i", "j"), ("k",), 9.0, 1)


def test_the_transform_kernels_counted_by_hand_and_their_roofline():
    """F(2×2, 3×3): Lavin and Gray's 32 adds a tile and channel for the input (Bᵀ d B: two sides of four rows of
    two terms) and 24 for the output (Aᵀ M A: rows of three terms, four then two of them)."""
    op = fuse(_conv(C=8, K=16, H=8, W=8), ("bias", "relu"), (1,))  # 8×8 out: 16 tiles of 2×2
    kernels = transform_kernels(op, 2)
    assert kernels["input_transform"] == TransformKernel("input_transform", 16 * 8, 32 * 16 * 8, 16 * 16 * 8 * 4,
                                                         16 * 16 * 8)
    # 24 adds and 4 outputs × 2 steps a tile and channel; M's 16 points and the bias read in runs; 4 outputs scattered
    assert kernels["output_transform"] == TransformKernel("output_transform", 16 * 16, (24 + 4 * 2) * 16 * 16,
                                                          (16 + 1) * 16 * 16 * 4, 4 * 16 * 16)
    # one block of 128 threads: one SM of 132 does it all, its four warps issuing every cycle
    k = kernels["input_transform"]
    got = transform_seconds(H100, k)
    dram = (k.coalesced_bytes + 4 * k.scattered_accesses) / (3350e9 / 132)
    l2 = (k.coalesced_bytes + SECTOR_BYTES * k.scattered_accesses) / (5500e9 / 132)
    l1 = k.scattered_accesses / 1.98e9  # a gathered lane's access: one pass of the SM's L1
    assert got.figures["dram_s"] == pytest.approx(dram) and got.figures["l2_s"] == pytest.approx(l2)
    assert got.figures["l1_s"] == pytest.approx(l1)
    assert got.seconds == pytest.approx(LAUNCH_S + max(dram, l2, l1, k.flops / (67e12 / 132)))
    # 50,176 threads (784 tiles × 64 channels): 392 blocks fill the 132 SMs, every rate the device's
    wide = transform_kernels(_conv(C=64, K=64, H=56, W=56), 2)["input_transform"]
    assert wide.threads == 784 * 64
    got = transform_seconds(H100, wide)
    assert got.figures["l1_s"] == pytest.approx(16 * 784 * 64 / (132 * 1.98e9))
    assert got.figures["l2_s"] == pytest.approx((wide.coalesced_bytes + 32 * wide.scattered_accesses) / 5500e9)
    assert got.figures["issue_efficiency"] == 1.0
    # F(4×4) needs no multiply in the input transform's ±1, ±2, ±4 rows beyond its constants: more FLOPs a tile
    assert transform_kernels(op, 4)["input_transform"].flops > kernels["input_transform"].flops


@pytest.mark.parametrize("params", [dict(stride=2), dict(kernel=5, padding=2), dict(groups=2)])
def test_no_winograd_where_it_does_not_take_the_layer(params):
    assert GpuTarget("h100").alternatives(_conv(**params)) == ()


def test_a_winograd_tile_offered_passes_the_check_that_times_it():
    """F(4×4, 3×3) over YOLO-v1 C13's 1,024 channels: ``refused`` offers it (its error a few 1e-5 of the output's
    magnitude), and an H200 then refused every such kernel, judging it element by element (2.7e-3 off at outputs
    near zero). The check a measurement runs (``check_and_time``) must judge it as the offer did, and still catch a
    kernel that writes one tile wrong."""
    import tvm

    from gpu_cpu.measure import MeasureJob, check_and_time
    from hetero_dse.ops.winograd import refused, winograd_conv2d

    op = _conv(C=1024, K=1024, H=14, W=14)
    x, w = op.random_inputs(0)
    want = op.reference([x, w])
    got = winograd_conv2d(np.pad(x[0], ((0, 0), (1, 1), (1, 1))), w, 4, "float32")[None]
    assert refused(4, 3, "float32", 1024) is None
    assert not np.allclose(got, want, rtol=1e-3, atol=1e-3)  # what the check asked before: element by element
    torn = got.copy()
    torn[0, 7, 4:8, 4:8] = 0  # one output tile of one channel never written

    class StandIn:
        """A test double of a built module: its kernel writes a given output; its timer reports one microsecond."""
        entry_name = "main"

        def __init__(self, output):
            self.output = output

        def __getitem__(self, name):
            return lambda *args: args[-1].copyfrom(self.output.astype("float32"))

        def time_evaluator(self, *args, **kwargs):
            return lambda *a: type("Timed", (), {"results": [1e-6] * 4})()

    point = {TILE_KNOB: 4}
    winograd = MeasureJob.of(op, "builtin", point, target="cuda", repeat=3)
    assert check_and_time(StandIn(got), op, tvm.cpu(0), winograd)["seconds"] == 1e-6
    with pytest.raises(ValueError, match="errs by .* of the output's largest magnitude, beyond the 1e-03"):
        check_and_time(StandIn(torn), op, tvm.cpu(0), winograd)
    # a direct kernel is still judged element by element: the same output from one is wrong
    direct = MeasureJob.of(op, "builtin", {}, target="cuda", repeat=3)
    with pytest.raises(ValueError, match="differs from the reference"):
        check_and_time(StandIn(got), op, tvm.cpu(0), direct)


def test_which_targets_offer_winograd_and_in_which_domain():
    target = GpuTarget("h100")
    assert [a.label for a in target.alternatives(_conv())] == ["Winograd F(2×2, 3×3)", "Winograd F(4×4, 3×3)"]
    assert GpuTarget("h100", dtype="float16").alternatives(_conv()) == ()
    assert GpuTarget("h100", algorithm="direct").alternatives(_conv()) == ()
    with pytest.raises(HeteroDSEError, match="the GPU's convolution algorithm is one of auto, direct, winograd"):
        GpuTarget("h100", algorithm="fft")
    (_, four) = target.alternatives(_conv(C=256, K=512, H=28, W=28))
    estimated = four.target.space(four.op)
    assert estimated.dataflow == Dataflow.winograd(4) and not estimated.domain  # estimates search the whole space
    four.target.measured = True  # as where a GPU measures: seed 001's §5.3 domain, the α² points of a tile whole
    measured = four.target.space(four.op)
    assert measured.domain and all(f[0] == 1 for f in measured.splits[measured.loop_names.index("e")])


def _record(cli, out, *extra):
    r = cli("explore", "--op", "conv2d", "--param", "C=32", "--param", "K=64", "--param", "H=28", "--param", "W=28",
            "--param", "kernel=3", "--param", "padding=1", "--target", "gpu", "--budget", "96", "--no-history",
            "--out", out, *extra)
    assert r.code == 0, r.err
    (record,) = json.loads((out / "report.json").read_text())["gpu"]
    return record


def test_explore_keeps_the_fastest_estimate_and_says_which(cli, tmp_path):
    record = _record(cli, tmp_path / "auto")
    compared = record["algorithms"]
    assert [a["algorithm"] for a in compared] == ["direct", "Winograd F(2×2, 3×3)", "Winograd F(4×4, 3×3)"]
    (chosen,) = [a for a in compared if a["chosen"]]
    assert chosen["seconds"] == min(a["seconds"] for a in compared) == record["best"]["seconds"]
    assert record["algorithm"] == chosen["algorithm"] and record["trials"] == 3 * 96
    assert set(record["searches"]) == {a["algorithm"] for a in compared}
    if chosen["algorithm"] != "direct":  # its estimate is its three kernels'
        figures = record["best"]["figures"]
        assert chosen["seconds"] == pytest.approx(figures["input_transform_s"] + figures["product_s"]
                                                  + figures["output_transform_s"])
    off = _record(cli, tmp_path / "off", "--winograd", "off")
    assert off["algorithms"] == [] and off["algorithm"] == "direct" and off["trials"] == 96


def test_winograd_on_writes_three_kernels_schedule_json_says_how_to_take_the_weights_and_replay_rebuilds_it(
        cli, tmp_path):
    out = tmp_path / "on"
    record = _record(cli, out, "--winograd", "on")
    assert record["algorithm"].startswith("Winograd F(") and record["best"]["bound"].split(":")[0] in (
        "input_transform", "product", "output_transform")
    figures = record["best"]["figures"]  # the estimate is its three kernels', one after the other
    assert record["best"]["seconds"] == pytest.approx(figures["input_transform_s"] + figures["product_s"]
                                                      + figures["output_transform_s"])
    assert [a["algorithm"] for a in record["algorithms"]] == ["Winograd F(2×2, 3×3)", "Winograd F(4×4, 3×3)"]
    saved = out / record["directory"]
    schedule = json.loads((saved / "schedule.json").read_text())
    m = schedule["knobs"][TILE_KNOB]
    assert schedule["packed_weights"]["W"]["winograd"] == m and schedule["estimate"] is True
    assert schedule["packed_weights"]["W"]["shape"] == [(m + 2) ** 2, 32, 64]
    assert (saved / "kernel.cu").read_text().count("__global__") == 6  # three kernels, declared then defined
    md = (out / "report.md").read_text()
    assert "Winograd F(" in md and "GFLOPS count direct convolution's FLOPs" in md
    r = cli("replay", saved)
    assert r.code == 0 and "identical" in r.out, r.err


def test_where_a_gpu_measures_each_algorithms_best_is_timed_as_the_convolution_and_the_fastest_kept(monkeypatch):
    """No GPU here: the target's timing of whole convolutions is a test double (``_measure``), so the choice is
    known. Each algorithm's best is timed as the convolution (its Winograd point whole), not as its product."""
    from gpu_cpu.measure import MeasureResult
    from hetero_dse.evaluate.measured import Trial
    from hetero_dse.explore.loop import LoopResult
    from hetero_dse.targets.base import Searched

    target = GpuTarget("h100")
    target.measured = True
    op = _conv(C=32, K=64, H=14, W=14)
    space = target.space(op)
    rng = np.random.default_rng(0)
    direct = Trial(space.decode(space.sample(1, rng)[0]), MeasureResult(4e-5))
    searched = []
    for alternative in target.alternatives(op):
        other = alternative.target.space(alternative.op)
        log = type("Log", (), {"trials": [Trial(other.decode(other.sample(1, rng)[0]), MeasureResult(1e-6))]})()
        searched.append(Searched(alternative, other, "sa", LoopResult(), log))
    # as timed on the device: F(4×4) fastest, though its product alone was no faster than F(2×2)'s
    timings = {None: 3e-5, 2: 2.5e-5, 4: 2e-5}
    timed = []
    monkeypatch.setattr(target, "_measure", lambda op_, points: timed.extend(points) or [
        MeasureResult(timings[p.get(TILE_KNOB)]) for p in points])
    chosen, algorithms = target._choose(op, space, direct, searched)
    assert [p.get(TILE_KNOB) for p in timed] == [None, 2, 4]  # the convolution at each best, one after the other
    assert chosen.point[TILE_KNOB] == 4 and chosen.result.seconds == 2e-5
    assert [(a["algorithm"], a["seconds"], a["chosen"], a["searched"]) for a in algorithms] == [
        ("direct", 3e-5, False, "convolution"), ("Winograd F(2×2, 3×3)", 2.5e-5, False, "product alone"),
        ("Winograd F(4×4, 3×3)", 2e-5, True, "product alone")]


@pytest.mark.parametrize("algorithm", ["auto", "winograd"])
def test_a_chosen_winograd_schedule_nvcc_rejects_gives_way_to_direct_or_is_refused(algorithm, monkeypatch,
                                                                                     tmp_path):
    """A stand-in for nvcc rejecting the Winograd module (the estimate never built it): with auto, direct
    convolution's best is written and the comparison says why; with --winograd on, one sentence."""
    from gpu_cpu.schedule import ScheduleError
    from hetero_dse.targets import gpu_write
    from hetero_dse.targets.base import Search
    from hetero_dse.targets.flow import explore

    real = gpu_write.build_cuda

    def rejecting(mod, device, compile_here=True):
        if "hetero_dse.winograd" in (mod["main"].attrs or {}):
            raise ScheduleError("nvcc rejects the generated CUDA for sm_90: (a test double)")
        return real(mod, device, compile_here)

    monkeypatch.setattr(gpu_write, "build_cuda", rejecting)
    target = GpuTarget("h100", algorithm=algorithm)
    t = explore(_conv(C=256, K=512, H=28, W=28), target, "random", Search(seed=0, budget=32))
    assert t.algorithm.startswith("Winograd")  # F(4×4) wins by the roofline here (BENCHMARKS.md: 1.95×)
    if algorithm == "winograd":
        with pytest.raises(HeteroDSEError, match="does not build .*leave --winograd on out"):
            target.write(t, tmp_path, seed=0)
        return
    written = target.write(t, tmp_path, seed=0)
    assert TILE_KNOB not in t.best and t.algorithm == "direct"
    direct = next(a for a in t.algorithms if a["algorithm"] == "direct")
    assert t.best_seconds == direct["seconds"] and "did not build" in written.warnings[0]
    assert [a["error"] is not None for a in t.algorithms if not a["chosen"]].count(True) == 1
    assert json.loads((tmp_path / written.directory / "schedule.json").read_text())["knobs"].get(TILE_KNOB) is None
