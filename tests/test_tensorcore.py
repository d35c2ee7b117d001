"""The GPU's tensor cores (issue 22): the operator seen as a GEMM, Bolt's templated space and its limits, the
tensorized kernels (float16 and int8, GEMM and implicit-GEMM convolution, padded shapes, a fused epilogue)
compiled by nvcc for sm_80 and sm_90 down to the MMA instructions, the same padding and layout transformation
checked numerically on TVM's CPU path, and the tensor-core roofline by hand."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from cost_models.gpu_roofline import LAUNCH_S, estimate_tensor_cores
from gpu_cpu.schedule import apply_gpu, build_cpu, build_cuda, run_cpu
from gpu_cpu.tensorcore import apply_tensorcore
from hetero_dse.analysis import analyze
from hetero_dse.epilogue import fuse
from hetero_dse.hardware.gpus import get_device
from hetero_dse.ops import get_builtin
from hetero_dse.space.gpu import GpuSpace
from hetero_dse.space.point import Point
from hetero_dse.space.tensorcore import ARITHMETIC, TensorCoreSpace, gemm_view, tensor_core_arithmetic

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="CUDA code generation needs nvcc")


def op(name, **params):
    return get_builtin(name).instantiate(params)


def conv(C=3, H=20, K=24, kernel=3, stride=1, dtype="float16", **more):
    return op("conv2d", batch=1, C=C, H=H, W=H, K=K, kernel=kernel, stride=stride, padding=1, dtype=dtype, **more)


def point(**knobs):
    base = {"mma": "wmma.m16n16k16.f16.f32", "warps_m": 2, "warps_n": 2, "frags_m": 2, "frags_n": 2, "k_frags": 2,
            "stages": 2, "vector": 8, "skew": 8}
    return Point({**base, **knobs})


def test_an_operator_is_seen_as_the_gemm_it_is():
    v = gemm_view(analyze(op("gemm", M=500, N=300, K=100, dtype="float16")))
    assert (v.batch, v.m, v.n, v.k, v.dtype) == (1, 500, 300, 100, "float16")
    assert ARITHMETIC[v.dtype].accumulator == "float32" and ARITHMETIC["bfloat16"].accumulator == "float32"
    # a convolution: M the output pixels, N the output channels, K the input channels times the window
    v = gemm_view(analyze(conv(C=3, H=20, K=24, stride=2)))
    assert (v.batch, v.m, v.n, v.k) == (1, 10 * 10, 24, 3 * 9)
    # depthwise: every channel its own GEMM (the loop both inputs index is the batch)
    v = gemm_view(analyze(op("depthwise_conv2d", batch=1, C=8, H=12, W=12, kernel=3, padding=1, dtype="float16")))
    assert (v.batch, v.m, v.n, v.k) == (8, 144, 1, 9)
    # three tensors multiplied are no GEMM; float32 has no tensor-core arithmetic here; Volta no int8 one
    bilinear = analyze(op("bilinear", M=16, N=16, K=16, L=16, dtype="float16"))
    assert gemm_view(bilinear) is None
    assert "not a contraction of two tensors" in tensor_core_arithmetic(bilinear, get_device("h100"))
    assert "float32 inputs have no tensor-core instruction" in tensor_core_arithmetic(
        analyze(op("gemm", M=64, N=64, K=64)), get_device("h100"))
    assert tensor_core_arithmetic(analyze(op("gemm", M=64, N=64, K=64, dtype="int8")), get_device("v100")) == \
        "v100 (sm_70) has no int8 tensor cores"
    # bfloat16 came with Ampere, at the float16 rate
    bf16 = analyze(op("gemm", M=64, N=64, K=64, dtype="bfloat16"))
    assert tensor_core_arithmetic(bf16, get_device("v100")) == "v100 (sm_70) has no bfloat16 tensor cores"
    assert tensor_core_arithmetic(bf16, get_device("a100")) is None
    assert get_device("a100").tensor_tflops("bfloat16") == get_device("a100").tensor_tflops("float16") == 312.0
    # a matrix-vector product and a depthwise convolution have no tensor-core tile (TVM's normalisation drops
    # their unit loop; a 16-wide tile would be one sixteenth used)
    assert tensor_core_arithmetic(analyze(op("gemm", M=1, N=1000, K=512, dtype="float16")), get_device("h100")) == \
        "its M is 1, no tensor-core tile"
    depthwise = op("depthwise_conv2d", batch=1, C=8, H=12, W=12, kernel=3, padding=1, dtype="bfloat16")
    assert tensor_core_arithmetic(analyze(depthwise), get_device("h100")) == "its N is 1, no tensor-core tile"


def test_the_template_and_its_limits_by_hand():
    space = TensorCoreSpace(analyze(op("gemm", M=500, N=300, K=100, dtype="float16")), get_device("a100"))
    p = point(warps_m=2, warps_n=1, frags_m=4, frags_n=2, k_frags=2, stages=2, skew=8)
    assert space.tiles(p) == {"bm": 128, "bn": 32, "bk": 32, "wm": 64, "wn": 32, "fm": 16, "fn": 16}
    # padded to the block tile: 512 × 320 × 128 multiply-adds for 500 × 300 × 100
    assert space.padded(p) == {"batch": 1, "m": 512, "n": 320, "k": 128}
    assert space.padding_overhead(p) == pytest.approx(512 * 320 * 128 / (500 * 300 * 100))
    assert space.grid(p) == 4 * 10
    lim = space.limits(p)
    # A and B chunks, two stages, rows of 32 halves padded by the skew of 8 to 40 (storage_align: a row's
    # start moves by 8 halves within every 32); the block's 128 × 32 float accumulators staged unskewed
    assert lim["shared_bytes"] == 2 * (128 + 32) * 40 * 2 + 128 * 32 * 4
    # 4 × 2 accumulator fragments of 8 words, (4 + 2) operand fragments of 4 words, the overhead
    assert lim["registers"] == 8 * 8 + 6 * 4 + 40 and lim["threads"] == 64
    huge = point(warps_m=4, warps_n=4, frags_m=8, frags_n=8, k_frags=8)
    problems = space.violations(huge)
    assert any("shared memory" in v for v in problems) and any("registers" in v for v in problems)
    assert any("the N tile 512 exceeds the N extent 300" in v for v in space.violations(point(warps_n=4, frags_n=8)))
    assert space.beyond_limits(huge).startswith("beyond the limits of a100")
    assert not space.violations(space.default_point())
    # K runs along A's rows in memory, down B's columns; a convolution gathers its input's windows, not its weights
    assert space.gathered == ("B",) and space.default_point()["vector"] == 4
    windows = TensorCoreSpace(analyze(conv()), get_device("a100"))
    assert len(windows.gathered) == 1 and "W" not in windows.gathered


def test_a_tiny_gemm_gets_a_default_shrunk_to_it():
    space = TensorCoreSpace(analyze(op("gemm", M=16, N=16, K=16, dtype="float16")), get_device("h100"))
    d = space.default_point()
    assert space.tiles(d)["bm"] == space.tiles(d)["bn"] == space.tiles(d)["bk"] == 16


CASES = {
    "gemm f16 padded": lambda: op("gemm", M=100, N=72, K=40, dtype="float16"),
    "gemm int8": lambda: op("gemm", M=64, N=64, K=64, dtype="int8"),
    "gemm bf16 padded": lambda: op("gemm", M=60, N=40, K=50, dtype="bfloat16"),
    "conv f16 C=3": lambda: conv(C=3, H=20, K=24),
    "conv f16 stride 2 + bias + add + relu": lambda: fuse(conv(C=8, H=16, K=16, stride=2), ["bias", "add", "relu"],
                                                         (1,)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_padding_and_the_implicit_gemm_compute_the_reference_on_tvms_cpu_path(case):
    """Where there is no GPU: the same reindex, padding and tiling, without the tensor intrinsics."""
    o = CASES[case]()
    space = TensorCoreSpace(analyze(o), get_device("a100"))
    for p in (space.default_point(), point(warps_m=1, warps_n=2, frags_m=1, frags_n=1, k_frags=1)):
        assert_emulated_reference(o, p, seed=3)


def assert_emulated_reference(o, p, seed):
    """The point's transformation run on TVM's CPU path equals the operator's reference: exactly in int8."""
    inputs = o.random_inputs(seed)
    got = run_cpu(build_cpu(apply_tensorcore(o, p, emulate=True)), o, inputs)
    if o.dtype == "int8":
        np.testing.assert_array_equal(got, o.reference(inputs))
    else:
        np.testing.assert_allclose(got, o.reference(inputs), rtol=1e-4, atol=1e-4)


def _ptx(source: str, arch: str, tmp_path) -> str:
    """nvcc on the generated source: PTX for ``arch``, then assembled by ptxas into a cubin."""
    cu = tmp_path / "kernel.cu"
    cu.write_text(source)
    for flag, out in (("-ptx", "kernel.ptx"), ("-cubin", "kernel.cubin")):
        run = subprocess.run(["nvcc", f"-arch={arch}", flag, "-o", str(tmp_path / out), str(cu)],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "kernel.cubin").stat().st_size > 0
    return (tmp_path / "kernel.ptx").read_text()


@needs_nvcc
@pytest.mark.parametrize("arch", ["a100", "h100"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tensorized_kernels_compile_for_sm80_and_sm90_down_to_the_mma_instructions(case, arch, tmp_path):
    o = CASES[case]()
    device = get_device(arch)
    space = TensorCoreSpace(analyze(o), device)
    p = space.default_point()
    _, source = build_cuda(apply_gpu(o, p), device)
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source))
    assert kernels == {"main_kernel"}  # one kernel: the gather of a convolution's windows is in its loads
    names = [t.op.name for t in o.inputs]
    signature = source[source.index("main_kernel("): source.index(")", source.index("main_kernel("))]
    assert all(f"{n}_ptr" in signature for n in names) and "reindex" not in signature
    ptx = _ptx(source, device.arch, tmp_path)
    k = space.padded(p)["k"] // 16
    warps_tile = p["frags_m"] * p["frags_n"] * p["k_frags"]
    kind = {"int8": "s32.s8.s8.s32", "bfloat16": "f32.bf16.bf16.f32", "float16": "f32.f32"}[o.dtype]
    mmas = ptx.count(f"wmma.mma.sync.aligned.row.col.m16n16k16.{kind}")
    assert mmas >= 1 and mmas % warps_tile == 0 and k >= p["k_frags"]
    assert ptx.count("wmma.load.a.sync") >= 1 and ptx.count("wmma.store.d.sync") >= 1
    # two stages: the shared buffers of A and B hold two K chunks (the next one loads while this one multiplies)
    shared = {m.group(1): int(m.group(2)) for m in re.finditer(r"__shared__ [^;]* (\w+)_reindex\w*_ptr\[(\d+)\]",
                                                               source)}
    _, single = build_cuda(apply_gpu(o, p.replace(stages=1)), device, compile_here=False)
    single_shared = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"__shared__ [^;]* (\w+)_reindex\w*_ptr\[(\d+)\]", single)}
    assert p["stages"] == 2 and all(shared[n] == 2 * single_shared[n] for n in single_shared if n != "O")
    if o.epilogue:  # the ReLU in the write-back of the one kernel
        assert "max(" in source[source.index("main_kernel(", source.index("main_kernel(") + 1):]


def test_the_tensor_core_roofline_by_hand():
    space = TensorCoreSpace(analyze(op("gemm", M=4096, N=4096, K=4096, dtype="float16")), get_device("a100"))
    p = point(warps_m=4, warps_n=2, frags_m=4, frags_n=4, k_frags=2, stages=2, skew=8)  # 256 × 128 × 32
    e = estimate_tensor_cores(space, p)
    f = e.figures
    assert (f["blocks"], f["threads"]) == (16 * 32, 256)
    # shared: 2 stages × (256 + 128) rows × 40 halves + the 256 × 128 float tile; registers 16·8 + 8·4 + 40
    assert f["shared_bytes"] == 2 * 384 * 40 * 2 + 256 * 128 * 4 and f["registers"] == 200
    # resident: min(32, 2048/256 = 8, 65536 / (256 × 200) = 1, 164 KB / 192,512 B = 0 → 1): one block per SM
    assert f["blocks_per_sm"] == 1 and f["waves"] == 5
    # 512 blocks of 8 warps over 5 waves of 108 SMs: 7.6 warps per SM, all four tensor cores fed
    assert f["issue_efficiency"] == 1.0
    assert f["compute_s"] == pytest.approx(2 * 4096**3 / 312e12)
    # every block stages (256 + 128) × 4096 halves from L2; every warp loads 4 + 4 fragments per 16-deep step
    assert f["l2_bytes"] == 512 * 384 * 4096 * 2
    assert f["shared_load_bytes"] == 512 * 8 * 256 * 8 * 512
    # A and B in halves once, C in floats once
    assert f["dram_s"] == pytest.approx((2 * 4096 * 4096 * 2 + 4096 * 4096 * 4) / 2039e9)
    assert e.seconds == pytest.approx(LAUNCH_S + max(f[k] for k in ("compute_s", "dram_s", "l2_s", "shared_s")))
    # one stage and one resident block: a chunk's load is not hidden behind the MMAs
    single = estimate_tensor_cores(space, p.replace(stages=1)).figures
    assert single["compute_s"] == pytest.approx(f["compute_s"] + max(f["l2_s"], f["shared_s"]))
    # Hopper's warp-level MMA: 62 % of its 989 TFLOPS
    hopper = TensorCoreSpace(analyze(op("gemm", M=4096, N=4096, K=4096, dtype="float16")), get_device("h100"))
    assert estimate_tensor_cores(hopper, p).figures["tensor_peak_tflops"] == pytest.approx(989 * 0.62)


@needs_nvcc
def test_explore_on_the_tensor_cores_says_which_arithmetic_it_used(cli, tmp_path):
    out = tmp_path / "out"
    result = cli("explore", "--op", "gemm", "--param", "M=200", "--param", "N=192", "--param", "K=64", "--target",
                 "gpu", "--gpu", "a100", "--dtype", "float16", "--budget", "200", "--no-history", "--out", str(out))
    assert result.code == 0, result.err
    report = json.loads((out / "report.json").read_text())
    (row,) = [r for r in report["rows"] if r["kind"] == "gpu"]
    assert row["basis"] == "estimate"
    schedule = json.loads(next(out.glob("*/gpu/schedule.json")).read_text())
    instruction = schedule["knobs"]["mma"]  # the best point's fragment shape, named in the row
    assert instruction in ("wmma.m16n16k16.f16.f32", "wmma.m32n8k16.f16.f32", "wmma.m8n32k16.f16.f32")
    assert row["detail"].startswith(f"float16 tensor cores ({instruction}), float32 accumulation")
    # its share of the peak is of the A100's float16 tensor cores (312 TFLOPS), not of its FP32 cores
    assert get_device("a100").tensor_tflops("float16") == 312
    assert row["peak_fraction"] == pytest.approx(row["gflops"] * 1e9 / 312e12)
    assert "wmma::mma_sync" in next(out.glob("*/gpu/kernel.cu")).read_text()
    replayed = cli("replay", next(out.glob("*/gpu")))  # the template's knobs rebuild the same kernel
    assert replayed.code == 0 and "identical to kernel.cu" in replayed.out, replayed.err
    # one data type a run on the GPU
    result = cli("explore", "--op", "gemm", "--target", "gpu", "--dtype", "float16,int8", "--no-history",
                 "--out", str(tmp_path / "two"))
    assert result.code == 1 and "one data type a run" in result.err


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8"])
def test_a_layer_the_tensor_cores_cannot_take_runs_in_its_type_on_the_simt_cores(cli, tmp_path, dtype):
    """ResNet-18's classifier (a matrix-vector product at batch 1) under --dtype float16 failed the whole
    layer; it is now computed in float16 on the SIMT cores (float32 accumulation), and the row says why."""
    out = tmp_path / "out"
    result = cli("explore", "--op", "gemm", "--param", "M=1", "--param", "N=100", "--param", "K=64", "--target",
                 "gpu", "--dtype", dtype, "--budget", "64", "--no-history", "--out", str(out))
    assert result.code == 0, result.err
    (row,) = [r for r in json.loads((out / "report.json").read_text())["rows"] if r["kind"] == "gpu"]
    assert row["detail"].startswith(f"{dtype} SIMT (its M is 1, no tensor-core tile)")
    assert "mma" not in json.loads(next(out.glob("*/gpu/schedule.json")).read_text())["knobs"]
    # the SIMT schedule of a narrow type computes the reference (float32 or int32 accumulation)
    o = op("gemm", M=1, N=100, K=64, dtype=dtype)
    space = GpuSpace(analyze(o), get_device("h100"), domain=False)
    inputs = o.random_inputs(2)
    got = run_cpu(build_cpu(apply_gpu(o, space.default_point() or space.decode(space.sample(
        1, np.random.default_rng(0))[0]), emulate=True)), o, inputs)
    np.testing.assert_allclose(got, o.reference(inputs), rtol=1e-4, atol=1e-4)


@needs_nvcc
def test_a_gpu_the_nvcc_here_cannot_compile_for_is_one_sentence(cli, tmp_path, monkeypatch):
    """CUDA 13 dropped Volta: a V100 is refused before any search, not at the end with an nvcc log."""
    monkeypatch.setattr("hetero_dse.hardware.gpus.nvcc_architectures", lambda nvcc: ("sm_75", "sm_80", "sm_90"))
    result = cli("explore", "--op", "gemm", "--target", "gpu", "--gpu", "v100", "--no-history",
                 "--out", str(tmp_path / "v100"))
    assert result.code == 1
    assert "does not compile for sm_70 (v100): it knows sm_75, sm_80, sm_90; choose another --gpu" in result.err


@needs_nvcc
def test_a_kernel_nvcc_rejects_is_a_schedule_error_not_a_built_module():
    """TVM's CUDA module compiles its source only when loaded on a GPU: build_cuda runs nvcc itself."""
    from gpu_cpu.schedule import ScheduleError

    o = op("gemm", M=64, N=64, K=64, dtype="float16")
    space = TensorCoreSpace(analyze(o), get_device("a100"))
    gathering = point(warps_m=1, warps_n=1, frags_m=1, frags_n=1, vector=8)  # 8-wide gather of B along K
    assert space.violations(gathering) == ["8-wide loads of B would gather along K"]
    with pytest.raises(ScheduleError, match="nvcc rejects the generated CUDA for sm_80: .*error"):
        build_cuda(apply_gpu(o, gathering), get_device("a100"))


@pytest.mark.parametrize("case", ["gemm f16 padded", "gemm int8", "gemm bf16 padded", "conv f16 C=3"])
def test_the_space_counts_the_shared_memory_the_generated_kernel_declares(case):
    """The occupancy and the 48 KB check read the space's count: it must be the kernel's own, byte for byte
    (the skewed rows of the operand stages and the unskewed float tile of the write-back)."""
    from gpu_cpu.cuda_usage import declared_shared_bytes

    o = CASES[case]()
    device = get_device("h100")
    space = TensorCoreSpace(analyze(o), device)
    points = [space.default_point()] + [space.decode(c) for c in space.sample(6, np.random.default_rng(1))]
    for p in points:
        _, source = build_cuda(apply_gpu(o, p), device, compile_here=False)
        assert declared_shared_bytes(source) == space.limits(p)["shared_bytes"], p


@pytest.mark.parametrize("case", ["gemm f16 padded", "gemm int8", "conv f16 stride 2 + bias + add + relu"])
@pytest.mark.parametrize("split", [2, 3])
def test_split_k_sums_its_partials_to_the_reference_on_tvms_cpu_path(case, split):
    """Split-K's two kernels (each split's partial GEMM, then the sum with the crop and the epilogue) as the
    GPU runs them, serially on TVM's CPU path; K padded to the tile times the splits."""
    o = CASES[case]()
    p = point(warps_m=1, warps_n=2, frags_m=1, frags_n=1, k_frags=1, vector=4, split_k=split)
    assert_emulated_reference(o, p, seed=4)


@needs_nvcc
def test_split_k_is_two_kernels_and_its_roofline_by_hand(tmp_path):
    # YOLO-v1 C15 in float16: a 7×7 output of 1,024 channels over K = 1,024 × 9
    o = get_builtin("conv2d").instantiate(shape="yolo:C15").with_dtype("float16")
    device = get_device("h100")
    space = TensorCoreSpace(analyze(o), device)
    v = space.view
    assert (v.m, v.n, v.k) == (49, 1024, 9216)
    p = point(warps_m=2, warps_n=2, frags_m=2, frags_n=2, k_frags=2, vector=4, split_k=4)  # 64 × 64 × 32
    assert space.padded(p) == {"batch": 1, "m": 64, "n": 1024, "k": 9216}  # 9216 = 4 splits × 72 chunks of 32
    assert space.grid(p) == 1 * 16 * 4 and space.grid(p.replace(split_k=1)) == 16  # 16 tiles: 12 % of 132 SMs
    small = TensorCoreSpace(analyze(op("gemm", M=64, N=64, K=96, dtype="float16")), device)
    assert "split-K 4 > the 3 K chunks" in small.violations(point(k_frags=2, split_k=4))
    f = estimate_tensor_cores(space, p).figures
    # each block streams its quarter of K; the partials are 4 float copies of the padded 64 × 1024 output
    assert f["l2_bytes"] == 64 * (64 + 64) * (9216 // 4) * 2
    assert f["shared_load_bytes"] == 64 * 4 * (9216 // 4 // 16) * (2 + 2) * 16 * 16 * 2
    assert f["partial_bytes"] == 4 * 64 * 1024 * 4
    out_bytes = 49 * 1024 * 4  # the float32 output, written by the summing kernel
    assert f["dram_s"] == pytest.approx((space.analysis.compulsory_bytes - out_bytes + f["partial_bytes"])
                                        / (device.memory_gbps * 1e9))
    assert f["sum_s"] == pytest.approx(LAUNCH_S + (f["partial_bytes"] + out_bytes) / (device.memory_gbps * 1e9))
    e = estimate_tensor_cores(space, p)
    assert e.seconds == pytest.approx(LAUNCH_S + max(f[k] for k in ("compute_s", "dram_s", "l2_s", "shared_s"))
                                      + f["sum_s"])
    # the code: two kernels, the second reading the partials and writing the output; nvcc compiles it for
    # sm_80 as for sm_90
    build_cuda(apply_gpu(o, p), get_device("a100"))
    _, source = build_cuda(apply_gpu(o, p), device)
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source))
    assert kernels == {"main_kernel", "main_kernel_1"}
    second = source[source.index("main_kernel_1(", source.index("main_kernel_1(") + 1):]
    args = re.findall(r"(\w+)_ptr", second[: second.index(")")])
    assert len(args) == 2 and args[0] == o.output.op.name and args[1].endswith("_rf")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rules_judged_on_arrays_of_rows_are_the_rules_point_by_point(case):
    o = CASES[case]()
    space = TensorCoreSpace(analyze(o), get_device("a100"))
    rows = np.random.default_rng(5).integers(0, space.cardinalities, size=(3000, space.num_knobs))
    by_point = np.array([not space.violations(space.decode(r)) for r in rows])
    assert by_point.any() and not by_point.all()
    assert (space.valid(rows) == by_point).all()


def test_the_tall_and_wide_fragments_by_hand():
    """m32n8k16 pads a narrow N to 8, not 16; its warp holds the same 256 accumulators as m16n16k16."""
    space = TensorCoreSpace(analyze(op("gemm", M=100, N=24, K=40, dtype="float16")), get_device("h100"))
    assert space.arithmetic.instructions == ("wmma.m16n16k16.f16.f32", "wmma.m32n8k16.f16.f32",
                                             "wmma.m8n32k16.f16.f32")
    tall = point(mma="wmma.m32n8k16.f16.f32", warps_m=2, warps_n=1, frags_m=1, frags_n=3, k_frags=1, stages=1)
    assert space.tiles(tall) == {"bm": 64, "bn": 24, "bk": 16, "wm": 32, "wn": 24, "fm": 32, "fn": 8}
    assert space.padded(tall) == {"batch": 1, "m": 128, "n": 24, "k": 48}  # N = 24 unpadded
    square = point(warps_m=2, warps_n=1, frags_m=2, frags_n=2, k_frags=1, stages=1)
    assert space.padded(square)["n"] == 32
    lim = space.limits(tall)
    # 1 × 3 fragments of 32 × 8 floats: 8 words each; operands (32 + 3 × 8) × 16 halves over 32 lanes
    assert lim["registers"] == 3 * 8 + (32 + 24) * 16 * 2 // 128 + 40
    assert lim["shared_bytes"] == 1 * (64 + 24) * 40 * 2 + 64 * 24 * 4


@needs_nvcc
@pytest.mark.parametrize("case,instruction", [("gemm f16 padded", "wmma.m8n32k16.f16.f32"),
                                              ("gemm bf16 padded", "wmma.m8n32k16.bf16.f32"),
                                              ("gemm int8", "wmma.m32n8k16.s8.s32"),
                                              ("conv f16 stride 2 + bias + add + relu", "wmma.m32n8k16.f16.f32")])
def test_tall_and_wide_fragments_compute_the_reference_and_compile_to_their_instruction(case, instruction, tmp_path):
    o = CASES[case]()
    device = get_device("h100")
    space = TensorCoreSpace(analyze(o), device)
    p = point(mma=instruction, warps_m=1, warps_n=2, frags_m=1, frags_n=1, k_frags=1, vector=4)
    assert not space.violations(p)
    assert_emulated_reference(o, p, seed=6)
    _, source = build_cuda(apply_gpu(o, p), device)
    shape = instruction.split(".")[1]
    ptx = _ptx(source, device.arch, tmp_path)
    assert re.findall(r"wmma\.mma\.sync\.aligned\.row\.col\.(m\d+n\d+k\d+)", ptx) and \
        set(re.findall(r"wmma\.mma\.sync\.aligned\.row\.col\.(m\d+n\d+k\d+)", ptx)) == {shape}


def test_the_wmma_intrinsics_kept_on_disk_are_tvms_and_a_broken_cache_is_made_again(tmp_path, monkeypatch):
    """The cache holds what TVM's generators make, structurally equal, for every arithmetic and fragment
    shape; a file cut short or missing an intrinsic is made again (and rewritten), never an error."""
    import tvm

    from gpu_cpu import intrinsics

    monkeypatch.setenv(intrinsics.CACHE_ENV, str(tmp_path))
    intrinsics._definitions.cache_clear()
    try:
        made = intrinsics._definitions()  # no file: generated, then written
        path = intrinsics.cache_file()
        assert path.parent == tmp_path and path.exists()
        want = intrinsics.generate()
        assert len(want) == 3 * 3 * 3 + 2 * 3 * 2  # load A, load B, MMA per arithmetic and shape; fill, store per
        for name, (desc, impl) in want.items():    # accumulator type and shape
            tvm.ir.assert_structural_equal(made[name][0], desc)
            tvm.ir.assert_structural_equal(made[name][1], impl)
        # the parser given its whole stack (as TVM gives it) makes the same definitions as with the top frames
        monkeypatch.setattr(intrinsics, "STACK_FRAMES", 10**9)
        for name, (desc, impl) in intrinsics.generate().items():
            tvm.ir.assert_structural_equal(want[name][0], desc)
            tvm.ir.assert_structural_equal(want[name][1], impl)
        monkeypatch.undo()
        monkeypatch.setenv(intrinsics.CACHE_ENV, str(tmp_path))
        intrinsics._definitions.cache_clear()
        kept = intrinsics._definitions()  # read back from the file
        for name, (desc, impl) in want.items():
            tvm.ir.assert_structural_equal(kept[name][0], desc)
            tvm.ir.assert_structural_equal(kept[name][1], impl)

        for broken in (path.read_text()[:1000], tvm.ir.save_json({"only_one": list(want[sorted(want)[0]])})):
            path.write_text(broken)
            intrinsics._definitions.cache_clear()
            assert set(intrinsics._definitions()) == set(want)
            assert set(tvm.ir.load_json(path.read_text()).keys()) == set(want)  # rewritten whole
        assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it
    finally:
        intrinsics._definitions.cache_clear()


def test_tvms_parser_is_given_the_top_of_the_stack_and_the_whole_again_after():
    """Inside ``_shallow_stack`` ``inspect.stack()`` is its caller's top frames, the caller first, as the whole
    stack's would begin; after it (an error inside too) it is ``inspect.stack`` again."""
    import inspect

    from gpu_cpu import intrinsics

    def caller():
        return inspect.stack()

    original, full = inspect.stack, caller()
    with intrinsics._shallow_stack():
        assert inspect.stack is not original
        top = caller()
    assert inspect.stack is original
    assert len(top) == intrinsics.STACK_FRAMES < len(full)
    # the same chain of callers as the whole stack begins with, the caller's line read as the whole's
    assert [f.function for f in top] == [f.function for f in full[:len(top)]]
    assert top[0].code_context == full[0].code_context == ["        return inspect.stack()\n"]
    with pytest.raises(RuntimeError), intrinsics._shallow_stack():
        raise RuntimeError
    assert inspect.stack is original and len(caller()) == len(full)


def test_the_asynchronous_copies_rules_by_hand():
    """cp.async: Ampere on, behind two stages or more, 4 to 16 contiguous aligned bytes a copy; without it, two
    stages at most; no more stages than a block has K chunks to fill them."""
    a100 = TensorCoreSpace(analyze(op("gemm", M=128, N=128, K=196, dtype="float16")), get_device("a100"))
    copies = point(stages=3, async_copy=1, vector=4, k_frags=1)
    assert a100.violations(copies) == []
    assert a100.violations(copies.replace(stages=1)) == ["asynchronous copies with one stage: nothing overlaps them"]
    assert a100.violations(copies.replace(async_copy=0)) == [
        "3 stages of synchronous copies: only cp.async keeps more than two in flight"]
    assert a100.violations(copies.replace(vector=1)) == [
        "1-wide copies of float16 are narrower than cp.async's 4 bytes"]
    # rows of 196 halves (392 bytes): every other row starts 8 bytes off a 16-byte boundary
    assert a100.violations(copies.replace(vector=8)) == [
        "rows of K = 196 are not whole 8-wide copies: cp.async's would be misaligned"]
    # B gathers along K: with cp.async it is copied element by element, so A's 16-byte copies are allowed
    aligned = TensorCoreSpace(analyze(op("gemm", M=128, N=128, K=256, dtype="float16")), get_device("a100"))
    assert aligned.violations(copies.replace(vector=8)) == []
    assert aligned.violations(copies.replace(vector=8, async_copy=0, stages=2)) == [
        "8-wide loads of B would gather along K"]
    # 196 / 16 -> 13 chunks: split 4 ways, 4 a block; split 8 ways, 2 a block
    assert a100.violations(copies.replace(stages=4, split_k=4, skew=0)) == []
    assert a100.violations(copies.replace(stages=4, split_k=8, skew=0)) == [
        "4 stages for 2 K chunks a block: buffers never filled"]
    int8 = TensorCoreSpace(analyze(op("gemm", M=64, N=64, K=64, dtype="int8")), get_device("a100"))
    assert int8.violations(point(mma="wmma.m16n16k16.s8.s32", stages=2, async_copy=1, vector=2)) == [
        "2-wide copies of int8 are narrower than cp.async's 4 bytes"]
    v100 = TensorCoreSpace(analyze(op("gemm", M=128, N=128, K=256, dtype="float16")), get_device("v100"))
    assert v100.violations(copies) == ["v100 (sm_70) has no cp.async (sm_80 on)"]
    # a point recorded before the knob ran plain copies
    old = Point({k: v for k, v in a100.default_point().items() if k != "async_copy"})
    assert (a100.encode(old) == a100.encode(a100.default_point())).all()


def _async_sources(source: str) -> set[str]:
    """The global arrays the kernel's cp.async calls copy from (TVM's helpers take dst, offset, src, offset)."""
    return set(re.findall(r"^\s*ptx_cp_async\w*\(\w+, .*?, (\w+)_ptr, ", source, re.M))


@needs_nvcc
@pytest.mark.parametrize("arch", ["a100", "h100"])
@pytest.mark.parametrize("case", ["gemm f16 padded", "gemm int8", "gemm bf16 padded",
                                  "conv f16 stride 2 + bias + add + relu"])
def test_cp_async_pipelines_compile_and_copy_only_contiguous_rows(case, arch, tmp_path):
    """Three and four chunks in flight through cp.async, compiled by nvcc for sm_80 and sm_90. TVM's async-copy
    pass turns a vector-wide gather into one contiguous copy of the wrong elements, so the inputs that gather
    along K must reach it element by element and stay plain loads: the kernel's cp.async sources are exactly the
    inputs whose K is contiguous."""
    o = CASES[case]()
    device = get_device(arch)
    space = TensorCoreSpace(analyze(o), device)
    contiguous = {r.tensor for r in space.analysis.reads} - set(space.gathered)
    single = space.default_point().replace(k_frags=1, vector=2 if o.dtype != "int8" else 4, stages=1)
    _, plain = build_cuda(apply_gpu(o, single), device, compile_here=False)
    plain_shared = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"__shared__ [^;]* (\w+)_reindex\w*_ptr\[(\d+)\]", plain)}
    built = 0
    for stages in (3, 4):
        p = single.replace(stages=stages, async_copy=1)
        if space.violations(p):
            assert any("buffers never filled" in v for v in space.violations(p)), space.violations(p)
            continue
        _, source = build_cuda(apply_gpu(o, p), device)
        built += 1
        assert _async_sources(source) == contiguous
        ptx = _ptx(source, device.arch, tmp_path)
        assert "cp.async.ca.shared.global" in ptx and f"cp.async.wait_group {stages - 2}" in ptx
        shared = {m.group(1): int(m.group(2)) for m in re.finditer(
            r"__shared__ [^;]* (\w+)_reindex\w*_ptr\[(\d+)\]", source)}
        assert all(shared[n] == stages * plain_shared[n] for n in plain_shared if n != "O")
    assert built


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("stages", [3, 4])
def test_deep_pipelines_compute_the_reference_on_tvms_cpu_path(case, stages):
    """The pipeline's buffers, ``stages`` K chunks deep with their prologue and drain, run serially on TVM's CPU
    path (where a copy has always landed: the cp.async waits are the GPU's alone)."""
    o = CASES[case]()
    p = point(warps_m=1, warps_n=1, frags_m=1, frags_n=2, k_frags=1, stages=stages, async_copy=1, vector=2)
    assert_emulated_reference(o, p, seed=stages)


@needs_nvcc
def test_a_first_run_on_the_tensor_cores_says_it_is_making_their_intrinsics(cli, tmp_path, monkeypatch):
    """Making them costs about 10 s once per TVM version: the run says so before it starts instead of stalling
    its first build without a word, and keeps them for the next run, which says nothing."""
    from gpu_cpu import intrinsics

    monkeypatch.setenv(intrinsics.CACHE_ENV, str(tmp_path / "cache"))
    args = ("explore", "--op", "gemm", "--param", "M=64", "--param", "N=64", "--param", "K=64", "--target", "gpu",
            "--gpu", "a100", "--budget", "20", "--no-history")
    first = cli(*args, "--dtype", "float16", "--out", str(tmp_path / "first"))
    assert first.code == 0, first.err
    assert "Making the tensor cores' intrinsics" in first.out and intrinsics.cached()
    again = cli(*args, "--dtype", "float16", "--out", str(tmp_path / "again"))
    assert again.code == 0 and "intrinsics" not in again.out
    # float32 runs on the SIMT cores and needs none of them
    monkeypatch.setenv(intrinsics.CACHE_ENV, str(tmp_path / "other"))
    simt = cli(*args, "--out", str(tmp_path / "simt"))
    assert simt.code == 0 and "intrinsics" not in simt.out and not intrinsics.cached()
