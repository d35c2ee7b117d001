"""Epilogue fusion (bias, residual add, activation after a convolution or matrix product): the fused operator
on every target against torch — CPU schedules run, CUDA generated as one kernel, FPGA projects C-simulated
with the model's epilogue operators counted in the generated write process — and a user's op.py whose
convolution is followed by a ReLU, which the FPGA generator used to refuse."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from gpu_cpu.baselines import torch_output
from gpu_cpu.schedule import apply_cpu, apply_gpu, build_cpu, build_cuda, run_cpu
from hetero_dse.analysis import analyze
from hetero_dse.epilogue import fuse
from hetero_dse.errors import OperatorError
from hetero_dse.hardware.gpus import get_device
from hetero_dse.hls.lint import lint
from hetero_dse.ops import get_builtin
from hetero_dse.space.cpu import CpuSpace
from hetero_dse.space.gpu import GpuSpace

CASES = {
    "conv2d+bias+add+relu": ("conv2d", {"C": 8, "K": 16, "H": 10, "W": 10, "kernel": 3, "padding": 1},
                             ["bias", "add", "relu"]),
    "gemm+bias+relu6": ("gemm", {"M": 32, "N": 48, "K": 64}, ["bias", "relu6"]),
    "depthwise+bias+leaky": ("depthwise_conv2d", {"C": 8, "H": 10, "W": 10, "kernel": 3, "padding": 1},
                             ["bias", "leaky_relu(0.1)"]),
    "group_conv2d+bias+clip": ("group_conv2d", {"C": 8, "K": 16, "H": 9, "W": 9, "kernel": 3, "groups": 2},
                               ["bias", "clip(-0.5,0.5)"]),
}


def fused(case: str, dtype: str = "float32"):
    name, params, steps = CASES[case]
    op = get_builtin(name).instantiate({**params, "dtype": dtype})
    rank = len(op.output.shape)
    return fuse(op, steps, (rank - 1,) if name == "gemm" else tuple(range(1, rank - 2)))


def torch_eager(op, inputs):
    """What torch computes for the layer, written out step by step here (not through the tool's own calls)."""
    import torch
    import torch.nn.functional as F

    t = [torch.from_numpy(a.astype(np.float64)) for a in inputs]
    p = dict(op.params)
    if op.name == "gemm":
        out = t[0] @ t[1] + t[2]
    else:
        groups = p["C"] if op.name == "depthwise_conv2d" else p["groups"]
        out = F.conv2d(t[0], t[1], t[2].reshape(-1), stride=p["stride"], padding=p["padding"],
                       dilation=p["dilation"], groups=groups)
    for step in op.epilogue[1:]:
        if step == "add":
            out = out + t[3].reshape(out.shape)
        elif step == "relu":
            out = F.relu(out)
        elif step == "relu6":
            out = F.relu6(out)
        elif step.startswith("leaky_relu"):
            out = F.leaky_relu(out, 0.1)
        else:
            out = out.clamp(-0.5, 0.5)
    return out.numpy().reshape([int(d) for d in op.output.shape])


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fused_reference_and_torchs_call_are_torch_eager(case):
    op = fused(case)
    inputs = op.random_inputs(3)
    want = torch_eager(op, inputs)
    np.testing.assert_allclose(op.reference(inputs), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(torch_output(op, inputs), want, rtol=1e-4, atol=1e-4)  # the CPU/GPU baseline


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_schedules_compute_the_epilogue_in_the_write_back(case):
    op = fused(case)
    analysis = analyze(op)
    assert analysis.main.reduce and len(analysis.epilogue) == 1  # the reduction stays the main node
    space = CpuSpace(analysis)
    inputs = op.random_inputs(5)
    want = torch_eager(op, inputs)
    for row in space.sample(4, np.random.default_rng(0)):
        point = space.decode(row)
        mod = apply_cpu(op, point)
        # one pass: no block of its own for the epilogue, and no whole intermediate output (only the tile's
        # accumulator, whose write-back computes the epilogue)
        assert "E" not in [b.name_hint for b in _blocks(mod)]
        assert re.search(r"\bO = T\.\w*alloc_buffer", mod.script()) is None
        np.testing.assert_allclose(run_cpu(build_cpu(mod), op, inputs, point), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("steps", [["bias", "leaky_relu(0.1)"], ["bias", "add", "relu"]])
def test_a_tile_vectorised_along_the_channels_runs_its_epilogue_on_whole_vectors(monkeypatch, steps):
    """A stride-2 first layer (YOLO-v1's L1, 3 -> 64 at 448², here smaller): the default point vectorises the
    output channels, not the output row (whose image reads are strided: a gather a vector; 118 ms against 6.4 on
    the full layer). Its tile is accumulated channels-innermost; the epilogue is computed on that layout, whole
    vectors at a time, into a staging tile, and only then copied out in the output's order (with bias and
    leaky ReLU in the element-by-element copy, the full layer took 6.45 ms; staged, 4.89; torch 5.2). A residual
    add is staged too (its input read along the channels), and computes what torch does."""
    monkeypatch.setenv("HETERO_DSE_VECTOR_BITS", "512")  # the default point depends on the host's vector width
    from hetero_dse.space import cpu as cpu_space

    cpu_space.host_vector_bits.cache_clear()
    try:
        op = fuse(get_builtin("conv2d").instantiate({"C": 3, "K": 32, "H": 64, "W": 64, "kernel": 7, "stride": 2,
                                                     "padding": 3}), steps, (1,))
        point = CpuSpace(analyze(op)).default_point()
    finally:
        cpu_space.host_vector_bits.cache_clear()
    assert point["vector"] == "k" and point["split.j"][-1] > 1  # the channels vectorised, a row of pixels tiled
    mod = apply_cpu(op, point)
    script = mod.script()
    # the write-back computes the epilogue into the staging tile in a vectorised loop; the copy-out follows
    staged = re.search(r"for \w+ in T\.vectorized\(\d+\):\s+with T\.sblock\(\"O_global\"\):", script)
    assert staged is not None and "E_global[" in script, script
    inputs = op.random_inputs(4)
    np.testing.assert_allclose(run_cpu(build_cpu(mod), op, inputs, point), torch_eager(op, inputs), rtol=1e-4,
                               atol=1e-4)


def _blocks(mod):
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    found = []

    def visit(block):
        found.append(sch.get(block))
        for child in sch.get_child_blocks(block):
            visit(child)

    visit(sch.get_sblock("root"))
    return found


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="CUDA code generation needs nvcc")
@pytest.mark.parametrize("arch", ["h100", "a100"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_kernels_apply_the_epilogue_in_the_same_kernel(case, arch):
    op = fused(case)
    device = get_device(arch)
    space = GpuSpace(analyze(op), device)
    point = space.decode(space.sample(1, np.random.default_rng(1))[0])
    _, source = build_cuda(apply_gpu(op, point), device)
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source))
    assert len(kernels) == 1, kernels  # fused: no second kernel over the output
    assert "bias" in source


@pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")
@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("case", ["conv2d+bias+add+relu", "gemm+bias+relu6", "depthwise+bias+leaky"])
def test_fpga_projects_apply_the_epilogue_in_the_write_process(case, dtype, tmp_path):
    from test_hls import assert_passes, build

    if dtype == "int8" and "leaky" in case:
        with pytest.raises(OperatorError, match="leaky_relu is not an integer epilogue"):
            fused(case, dtype)
        return
    op = fused(case, dtype)
    project, _, design = build(op, tmp_path)
    result = assert_passes(project)  # C-simulated against the fused reference; the lint counts the epilogue
    if dtype == "int8":
        assert result.max_abs_error == 0.0
    epilogue = design["epilogue"]
    n_operands = sum(s in ("bias", "add") for s in op.epilogue)
    assert epilogue["ports"] == n_operands and epilogue["lanes"] >= 1
    # hand count: bias, residual: one adder each; relu: one comparison; relu6: two; leaky: one multiply
    assert (epilogue["adds"], epilogue["muls"]) == {"conv2d+bias+add+relu": (2, 0), "gemm+bias+relu6": (1, 0),
                                                    "depthwise+bias+leaky": (1, 1)}[case]
    write = (project / "src" / "kernel.cpp").read_text().split("static void write_out")[1]
    assert write.count("BIND_OP") == epilogue["adds"] + epilogue["muls"]
    # the operand ports are read beside the write and counted in the traffic: the model charges each a word
    # per output word
    record = json.loads((project / "design.json").read_text())
    assert len(record["expectations"]["port_bundles"]) == len(op.inputs) - n_operands + 1 + n_operands


@pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")
def test_the_lint_catches_an_epilogue_the_model_does_not_charge(tmp_path):
    from test_hls import build

    project, _, design = build(fused("conv2d+bias+add+relu"), tmp_path)
    assert lint(project).ok
    record = json.loads((project / "design.json").read_text())
    record["predicted"]["epilogue"]["adds"] = 1  # a model that forgot the residual's adder
    findings = [str(f) for f in lint(project, record).findings]
    assert any(re.search(r"write_out.*performs \d+ data adds; the model charges", f) for f in findings), findings


def test_the_epilogue_costs_traffic_and_operators_in_the_model():
    from cost_models.fpga import FpgaModel
    from hetero_dse.hardware.board import load_board
    from hetero_dse.space.fpga import FpgaSpace

    plain = get_builtin("conv2d").instantiate(CASES["conv2d+bias+add+relu"][1])
    rows = None
    figures = []
    for op in (plain, fused("conv2d+bias+add+relu")):
        space = FpgaSpace(analyze(op), load_board("vu9p"), ["float32"], [300.0])
        rows = space.sample(64, np.random.default_rng(0)) if rows is None else rows
        figures.append(FpgaModel(space.tables).evaluate(rows, detail=True))
    base, epi = figures
    # per output word written, a word of each operand read: the write's bytes twice more
    out = base["buffers"][-1]
    np.testing.assert_allclose(epi["traffic_bytes"] - base["traffic_bytes"], 2 * out["loads"] * out["tile_bytes"])
    lanes = epi["epilogue_units"]
    assert np.all(lanes >= 1)
    # float adders: 2 a lane at the add's DSP cost
    from cost_models.fpga_costs import ARITHMETIC

    np.testing.assert_allclose(epi["dsp"] - base["dsp"], lanes * 2 * ARITHMETIC["float32"].dsp_add)


USER_OP = '''
from tvm import te
from hetero_dse import operator


@operator(C=4, K=8, H=6, W=6)
def conv_relu(C, K, H, W):
    """A 3x3 convolution followed by a ReLU, written in TE as a user would."""
    I = te.placeholder((1, C, H + 2, W + 2), name="I")
    Wt = te.placeholder((K, C, 3, 3), name="Wt")
    rc = te.reduce_axis((0, C), name="rc")
    rx = te.reduce_axis((0, 3), name="rx")
    ry = te.reduce_axis((0, 3), name="ry")
    O = te.compute((1, K, H, W), lambda b, k, i, j: te.sum(I[b, rc, i + rx, j + ry] * Wt[k, rc, rx, ry],
                                                           axis=[rc, rx, ry]), name="O")
    R = te.compute((1, K, H, W), lambda b, k, i, j: te.max(O[b, k, i, j], 0.0), name="R")
    return [I, Wt, R]
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")
def test_a_users_convolution_followed_by_relu_explores_and_csims_on_fpga(cli, tmp_path):
    op_py = tmp_path / "op.py"
    op_py.write_text(USER_OP)
    out = tmp_path / "out"
    result = cli("explore", str(op_py), "--board", "vu9p", "--budget", "300", "--csim", "--out", str(out))
    output = result.out + result.err
    assert result.code == 0, output
    assert "producer node" not in output
    (design,) = out.glob("**/design.json")
    record = json.loads(design.read_text())
    assert record["predicted"]["epilogue"]["compares"] == 1 and record["predicted"]["epilogue"]["ports"] == 0
    assert re.search(r"│ pass\s+│", output), output  # the C-simulation column


def test_a_fused_operator_is_rebuilt_as_it_is_in_a_measuring_worker(tmp_path):
    """Workers, replay and the library's timing rebuild the operator from a job or schedule.json: with its
    epilogue, or they would time (and check) the bare convolution."""
    from gpu_cpu.measure import MeasureJob, measure_cpu_job, torch_cpu_job
    from gpu_cpu.pipeline import Pipeline

    op = fused("conv2d+bias+add+relu")
    space = CpuSpace(analyze(op))
    job = MeasureJob.of(op, "builtin", space.default_point().to_json())
    assert job.operator().signature() == op.signature()
    with Pipeline(overlap=False) as pipeline:  # built, checked against the fused reference, timed
        (result,) = pipeline.evaluate([job])
    assert result.ok, result.error
    assert torch_cpu_job(job)["seconds"] > 0 and measure_cpu_job(job)["seconds"] > 0
