"""GPU without a GPU (issue 4): the roofline estimate computed by hand, the device limits, and the
``--target gpu`` flow that generates CUDA, labels every figure an estimate and refuses to run without nvcc."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hetero_dse.hardware.gpus import get_device
from cost_models.gpu_roofline import LAUNCH_S, estimate
from hetero_dse.space.gpu import GpuSpace
from hetero_dse.analysis import analyze
from hetero_dse.ops import get_builtin
from hetero_dse.space.point import Point


def gemm_point(i, j, k):
    return Point({"split.i": tuple(i), "split.j": tuple(j), "split.k": tuple(k), "unroll": 0})


def test_roofline_of_a_gemm_by_hand():
    space = GpuSpace(analyze(get_builtin("gemm").instantiate({"M": 512, "N": 512, "K": 512})), get_device("v100"))
    point = gemm_point((32, 1, 16, 1), (16, 2, 8, 2), (64, 2, 4))
    e = estimate(space, point)
    f = e.figures
    # 32×16 blocks of 16×8 threads; each thread 2 virtual threads × 2 outputs = 4 accumulators
    assert (f["blocks"], f["threads"], f["vthreads"], f["accumulators_per_thread"]) == (512, 128, 2, 4)
    # block tile 16×32 outputs over k-steps of 8: A 16×8 + B 8×32 floats staged = 1,536 B
    assert f["shared_bytes"] == (16 * 8 + 8 * 32) * 4
    # resident blocks per SM: min(32, 2048/128 = 16, 65536 regs / (128 × (4 + 24)) = 18, 96 KB / 1.5 KB = 64)
    assert f["blocks_per_sm"] == 16 and f["waves"] == 1
    # 6.4 blocks of 4 warps per SM: every scheduler has a warp to issue from
    assert f["issue_efficiency"] == 1.0
    flops = 2 * 512**3
    assert f["throughput_s"] == pytest.approx(flops / 15.7e12)
    # 2048 FMAs per thread in 4 independent chains of 4-cycle FMAs: far from binding
    assert f["latency_s"] == pytest.approx(2048 * 4 / 4 / 1.53e9)
    assert f["dram_s"] == pytest.approx(3 * 512 * 512 * 4 / 900e9)
    assert f["l2_bytes"] == 512 * 64 * 1536 and f["l2_s"] == pytest.approx(512 * 64 * 1536 / 2100e9)
    # per inner step a thread reads 1 element of A and 2×2 of B: 20 B, 8×64 steps, 512×128 threads
    assert f["shared_load_bytes"] == 512 * 128 * 64 * 8 * 20
    assert f["shared_s"] == pytest.approx(512 * 128 * 64 * 8 * 20 / (80 * 128 * 1.53e9))
    assert e.bound == "shared" and e.seconds == pytest.approx(LAUNCH_S + f["shared_s"])


def test_one_thread_waits_on_its_own_chains_and_tiny_kernels_cost_a_launch():
    space = GpuSpace(analyze(get_builtin("gemm").instantiate({"M": 16, "N": 16, "K": 64})), get_device("h100"))
    # 128 blocks of one thread with 2 accumulators: 128 FMAs in 2 chains of 4-cycle FMAs
    e = estimate(space, gemm_point((16, 1, 1, 1), (8, 1, 1, 2), (1, 1, 64)))
    assert e.figures["latency_s"] == pytest.approx(2 * 64 * 4 / 2 / 1.98e9)
    # 128/132 of a warp per SM for 4 schedulers, one lane of 32 busy in it
    assert e.figures["throughput_s"] == pytest.approx(2 * 16 * 16 * 64 / (67e12 * (128 / 132 / 4) / 32))
    e = estimate(space, gemm_point((16, 1, 1, 1), (1, 1, 16, 1), (1, 1, 64)))  # 16 blocks × 16 threads
    assert e.bound == "launch" and e.seconds == pytest.approx(LAUNCH_S + max(
        e.figures[k] for k in ("compute_s", "dram_s", "l2_s", "shared_s")))


def test_device_limits_are_enforced_before_building():
    space = GpuSpace(analyze(get_builtin("gemm").instantiate({"M": 512, "N": 512, "K": 512})), get_device("h100"))
    assert space.limit_violations(gemm_point((1, 1, 64, 8), (32, 1, 32, 1), (64, 2, 4))) == \
        ["2048 threads per block > 1024"]
    too_many_registers = gemm_point((32, 1, 1, 16), (32, 1, 1, 16), (64, 2, 4))  # 256 accumulators
    assert space.limit_violations(too_many_registers) == ["~280 registers per thread > 255"]
    big_staging = gemm_point((4, 1, 32, 4), (4, 1, 32, 4), (1, 1, 512))  # 128×512 + 512×128 floats
    assert space.limit_violations(big_staging) == ["524288 B of shared memory > 49152"]
    # what the device cannot run is what a failed trial records; the domain only prunes what the search sees
    assert space.beyond_limits(big_staging) == "beyond the limits of h100: 524288 B of shared memory > 49152"
    assert space.violations(big_staging)[0] == "524288 B of shared memory > 49152"


def test_seed_001s_domain_and_the_occupancy_rules_prune_the_gpu_space_by_hand():
    # YOLO-v1's C8-like layer: 3×3 window at stride 1, R = 9; on an H100 S_b = 114 KB / 4 = 29,184 words
    op = get_builtin("conv2d").instantiate({"batch": 1, "C": 256, "H": 28, "W": 28, "K": 512, "kernel": 3,
                                           "padding": 1})
    space = GpuSpace(analyze(op), get_device("h100"))
    assert space.domain and space.min_blocks == 132 and space.min_threads == 64
    words = 228 * 1024 // 2 // 4
    loops = space.loop_names  # b, k, i, j, then rc, rx, ry

    def conv_point(b, k, i, j, rc):
        knobs = dict(zip([f"split.{n}" for n in loops], [b, k, i, j, rc, (1, 1, 3), (1, 1, 3)], strict=True))
        return Point({**knobs, "unroll": 0})

    # z = 256 output channels a block: above sqrt(S_b / R) = 57; 4 blocks of 64 threads: fewer than the 132 SMs
    wide = conv_point((1, 1, 1, 1), (2, 1, 16, 16), (1, 1, 2, 14), (2, 1, 2, 7), (32, 8, 1))
    problems = space.domain_violations(wide)
    assert f"channel tile 256 > sqrt(S_b/R) = {(words / 9) ** 0.5:.0f}" in problems
    assert "4 blocks < 132 (one per SM)" in problems
    # one warp a block is pruned where the output has the work for two
    thin = conv_point((1, 1, 1, 1), (128, 1, 4, 1), (14, 1, 2, 1), (7, 1, 4, 1), (32, 8, 1))
    assert "32 threads a block < two warps" in space.domain_violations(thin)
    fine = conv_point((1, 1, 1, 1), (16, 2, 8, 2), (7, 1, 4, 1), (7, 1, 4, 1), (64, 4, 1))
    assert space.domain_violations(fine) == [] and space.violations(fine) == []
    # a gemm of 256 outputs cannot give 132 SMs two warps each: no occupancy rule, no window, only the shared
    # memory of two resident blocks
    tiny = GpuSpace(analyze(get_builtin("gemm").instantiate({"M": 16, "N": 16, "K": 16})), get_device("h100"))
    assert (tiny.min_blocks, tiny.min_threads) == (1, 1) and tiny.domain
    one_thread = gemm_point((16, 1, 1, 1), (16, 1, 1, 1), (1, 1, 16))
    assert tiny.violations(one_thread) == []
    # an operator whose domain random draws do not find keeps the limits alone
    assert not GpuSpace(analyze(op), get_device("h100"), domain=False).domain


def test_a_domain_rarer_than_the_draws_a_point_is_sampled_short_not_refused():
    """ResNet-18's 512 → 512 layer at 7×7 keeps about 0.06 % of its splits in seed 001's domain, near the one point
    in 2,000 draws the sampler allows: a measured search on an H200 died there asking for 512 points ("found no
    point ... in 1,024,000 draws", bench/data/gpu_winograd_h200.log) though the draws had found hundreds."""
    import numpy as np

    op = get_builtin("conv2d").instantiate({"C": 512, "K": 512, "H": 7, "W": 7, "kernel": 3, "padding": 1})
    space = GpuSpace(analyze(op), get_device("h100"))
    assert space.domain
    rows = np.random.default_rng(0).integers(0, space.cardinalities, size=(200_000, space.num_knobs))
    share = space.valid(rows).mean()
    assert 0 < share < 2 / space.draws_per_point
    drawn = space.sample(64, np.random.default_rng(1))  # 128,000 draws: too few for 64 at this share
    assert 0 < len(drawn) < 64 and space.valid(drawn).all()
    assert len(space.sample(8, np.random.default_rng(1))) == 8
    # a space with no point at all still says so
    from hetero_dse.space.base import SpaceError

    empty = GpuSpace(analyze(op), get_device("h100"))
    empty.device = replace(empty.device, shared_memory_per_block=0)
    with pytest.raises(SpaceError, match="found no point"):
        empty.sample(4, np.random.default_rng(0))


@pytest.mark.parametrize("shape", [{"shape": "yolo:C1"}, {"shape": "yolo:C13"},
                                   {"batch": 2, "C": 12, "H": 9, "W": 9, "K": 20, "kernel": 3, "stride": 2,
                                    "padding": 1}])
@pytest.mark.parametrize("domain", [True, False])
def test_the_rules_judged_on_arrays_of_rows_are_the_rules_point_by_point(shape, domain):
    """Rejection sampling judges blocks of rows at once; it must keep exactly the points ``violations`` keeps,
    and count each block's shared memory as the footprint's bounding boxes do."""
    import numpy as np

    op = get_builtin("conv2d").instantiate(**shape) if "shape" in shape else \
        get_builtin("conv2d").instantiate(shape)
    space = GpuSpace(analyze(op), get_device("h100"), domain=domain)
    rows = np.random.default_rng(3).integers(0, space.cardinalities, size=(1500, space.num_knobs))
    rows = np.concatenate([rows, space.sample(50, np.random.default_rng(4))])  # some inside the domain
    by_point = np.array([not space.violations(space.decode(r)) for r in rows])
    assert by_point.any() and not by_point.all()
    assert (space.valid(rows) == by_point).all()
    for row in rows[::97]:
        p = space.decode(row)
        tile = {n: int(np.prod(p[f"split.{n}"][1:])) for n in space.loop_names}
        boxes = sum(int(np.prod(a.bounding_box(tile))) * a.bytes_per_element for a in space.analysis.reads)
        assert space.limits(p)["shared_bytes"] == boxes
        assert space.limits(p)["threads"] == int(np.prod([p[f"split.{n}"][2] for n in space.loop_names[
            : space.num_spatial]]))


def test_explore_target_gpu_writes_cuda_and_labels_estimates(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("hetero_dse.targets.gpu.present_gpu", lambda: None)  # as on a machine without a GPU
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--target", "gpu", "--gpu", "a100",
            "--out", tmp_path / "o")
    assert r.code == 0, r.err
    assert "ESTIMATES" in r.out
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    (row,) = report["gpu"]
    assert row["estimate"] is True and row["device"] == "a100" and row["torch"] is None
    assert row["best"]["bound"] in ("compute", "dram", "l2", "shared", "launch")
    directory = tmp_path / "o" / row["directory"]
    source = (directory / "kernel.cu").read_text()
    assert "__global__" in source and "blockIdx.x" in source
    schedule = json.loads((directory / "schedule.json").read_text())
    assert schedule["estimate"] is True and schedule["checked_on_gpu"] is False
    assert schedule["target"] == {"kind": "cuda", "arch": "sm_80"}
    md = (tmp_path / "o" / "report.md").read_text()
    assert "**estimate** (roofline)" in md
    assert "Checked against an H100" in md and "float16 1.25–3.96× (geometric mean 2.29×)" in md
    # one time key for every target's schedule.json (the GPU's was "seconds", so a replay never showed it)
    assert schedule["measured_seconds"] == row["best"]["seconds"] and "seconds" not in schedule
    r = cli("replay", directory)
    assert r.code == 0 and "identical to kernel.cu" in r.out
    # the line wraps where the terminal does (a longer temporary path moves the break): compare the words
    assert f"recorded {row['best']['seconds'] * 1e3:.3f} ms, a roofline estimate)" in " ".join(r.out.split())
    (directory / "kernel.cu").write_text(source.replace("blockIdx.x", "blockIdx.y"))
    r = cli("replay", directory)
    assert r.code == 1 and "differs from its kernel.cu" in r.err


def test_gpu_target_without_cuda_toolkit_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr("hetero_dse.hardware.gpus.DEFAULT_CUDA_HOME", str(tmp_path / "no-cuda"))
    r = cli("explore", "--op", "gemm", "--shape", "small:s1", "--target", "gpu", "--out", tmp_path / "o")
    assert r.code == 1 and "needs the CUDA toolkit" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "o").exists()


def test_what_the_reports_say_of_the_estimate_against_an_h100_is_what_the_model_gives_today():
    """The footnote quotes how far the roofline was from the H100's measurements; recomputed here from the
    recorded runs, so a change to the model that moves it fails until the bench is run again."""
    import importlib.util
    import math
    from pathlib import Path

    from cost_models.gpu_roofline import ESTIMATE_OVER_H100

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("roofline_bench", root / "bench" / "gpu_roofline_vs_measured.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = [root / "bench" / "data" / name for name in ("gpu_yolo_h100.json", "gpu_yolo_h100_issue22.json")]
    rows = [bench.compare(row, "h100") for path in runs for row in bench.measured_rows(path) if row.get("best_knobs")]
    assert len(rows) == 14
    for dtype, (low, high, mean) in ESTIMATE_OVER_H100.items():
        ratios = [r["estimate_over_measured"] for r in rows if r["dtype"] == dtype]
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        assert (round(min(ratios), 2), round(max(ratios), 2), round(geomean, 2)) == (low, high, mean), dtype


def test_what_the_reports_say_of_the_winograd_estimate_against_an_h200_is_what_the_model_gives_today():
    """As above for each algorithm of a 3×3 convolution: the footnote quotes how far the roofline (Winograd's:
    its product's plus its transforms') was from an H200's measurements of each algorithm's best points."""
    import importlib.util
    from pathlib import Path

    from cost_models.gpu_roofline import ESTIMATE_OVER_H200
    from hetero_dse.targets.gpu_report import gpu_footnote

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("winograd_bench", root / "bench" / "gpu_winograd_vs_measured.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = [root / "bench" / "data" / name for name in ("gpu_winograd_h200.json", "gpu_winograd_h200_b.json")]
    rows = bench.compared(runs, "h200")
    # four layers: three algorithms each, less Y-C13's F(4×4), which the check refused in that run
    assert len(rows) == 11 and {r["layer"] for r in rows} == {"Y-C15", "R-L11", "Y-C13", "R-L7"}
    assert bench.summary(rows) == ESTIMATE_OVER_H200
    # R-L11 by hand: F(2×2) measured at 31.7 µs, and direct at 109.5 µs
    by = {(r["layer"], r["algorithm"]): r for r in rows}
    assert by["R-L11", "Winograd F(2×2, 3×3)"]["measured_s"] == pytest.approx(31.74e-6, rel=1e-3)
    assert by["R-L11", "direct"]["measured_s"] == pytest.approx(109.5e-6, rel=1e-3)

    class NoGpu:  # the footnote of a target that estimates
        gpu, remote, measured = get_device("h100"), None, False

    note = gpu_footnote(NoGpu())
    assert "Checked on the H200's roofline against an H200's measurements" in note
    assert "Winograd F(2×2, 3×3) 1.01–1.87× (1.43×)" in note
    assert "never checked" not in note


@pytest.mark.parametrize("name, memory_gbps", [("NVIDIA H200", 4800.0), ("NVIDIA H100 80GB HBM3", 3350.0),
                                               ("NVIDIA GH200 480GB", 3350.0), ("a Hopper unnamed", 3350.0),
                                               ("NVIDIA H200-NVL", 4800.0)])
def test_a_present_gpu_takes_the_peaks_of_the_device_it_names_else_of_its_architecture(monkeypatch, name,
                                                                                       memory_gbps):
    import tvm

    from hetero_dse.hardware.gpus import present_gpu

    class Device:  # a test double of TVM's CUDA device: an sm_90 part named as the driver names it
        exist, device_name, compute_version = True, name, "9.0"
        max_threads_per_block, max_shared_memory_per_block, multi_processor_count = 1024, 49152, 132

    monkeypatch.setattr(tvm, "cuda", lambda index=0: Device())
    gpu = present_gpu()
    assert gpu.name == name and gpu.arch == "sm_90" and gpu.memory_gbps == memory_gbps
