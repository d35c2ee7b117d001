"""Max pools and ResNet's downsampling branch in the layer pipeline: traced, modelled, written, C-simulated (the
sequential way and as the device runs it), linted, and each check broken on purpose (``small_net.Branched``)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from torch import nn

from cost_models.fpga_network_design import explore_network
from cost_models.fpga_pipeline import explore_pipeline, explore_traced, stage_layer
from cost_models.fpga_pipeline_pool import POOL_COMPARE_LUT, pool_resources
from cost_models.fpga_pipeline_storage import branch_ahead, branch_lag, consumed, line_storage
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from hetero_dse.hls.csim import csim
from hetero_dse.hls.lint import lint
from hetero_dse.hls.pipeline_project import check_pipeline_trips, write_pipeline_project
from hetero_dse.model.chain import trace_chain
from small_net import branched, with_fifo_depth

LUT, FF, DSP = (RESOURCE_KINDS.index(k) for k in ("lut", "ff", "dsp"))


def test_max_pools_and_the_branch_trace_as_torch_runs_them():
    layers, _, model, x = branched()
    assert [(c.shape.engine, c.source, c.residual) for c in layers] == [
        ("grid", -1, None), ("maxpool", 0, None), ("grid", 1, None), ("grid", 2, None),
        ("grid", 1, 3),  # the 1×1 downsampling reads the pool's output, two stages back, and adds conv2's
        ("maxpool", 4, None), ("grid", 5, None)]
    pool = layers[1].shape
    assert (pool.C, pool.K, pool.H, pool.R, pool.stride, pool.pad, pool.macs) == (16, 16, 12, 3, 2, 1, 0)
    with torch.no_grad():
        stem = model.b1(model.c1(x))
        assert np.allclose(layers[1].reference, nn.functional.max_pool2d(stem, 3, 2, 1).numpy())
        assert float(stem.min()) < 0  # the pool's padding must lose to negative pixels
        assert np.allclose(layers[-1].reference, model(x).numpy(), atol=1e-5)


@pytest.mark.parametrize("forward, says", [
    (lambda x: torch.relu(nn.functional.max_pool2d(x, 2)), "follows a max pool"),
    (lambda x: nn.functional.max_pool2d(x, 2, ceil_mode=True), "ceil_mode"),
    (lambda x: nn.functional.max_pool2d(x, 3, 2, 1, dilation=2), "undilated"),
])
def test_a_pool_the_pipeline_does_not_build_is_refused_in_one_sentence(forward, says):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return forward(self.c(x))

    with pytest.raises(HeteroDSEError, match=says):
        trace_chain(Net().eval(), torch.randn(1, 3, 8, 8))


def test_the_shared_kernel_refuses_a_max_pool_in_one_sentence():
    layers, _, _, _ = branched()
    with pytest.raises(HeteroDSEError, match="the shared network kernel runs no max pool"):
        explore_network([(c.shape, 1) for c in layers], load_board("zcu102"), "int8")


def _line(n, dtype, caps):
    line = np.zeros(len(RESOURCE_KINDS))
    line_storage(n, 1, 8, dtype, caps, line)
    return line


def test_a_pool_stage_costs_compares_and_its_line_buffer_by_hand():
    layers, _, _, _ = branched()
    n = stage_layer(layers[1].shape)  # 16 channels, 12×12, 3×3 stride 2 padded by one
    caps = {k: float(load_board("zcu102").cap(k)) for k in RESOURCE_KINDS}
    # int8, 8 lanes: its line buffer; two FIFOs of 64 bits in shift registers (a LUT two bits up to 16 words,
    # 16 LUTs and 10 registers of control each); a compare and select a lane; the output word; its control
    res, line = pool_resources(n, 8, "int8", caps, distance=1), _line(n, "int8", caps)
    assert res[DSP] == 0
    assert res[LUT] == line[LUT] + 2 * (32 + 16) + 8 * POOL_COMPARE_LUT["int8"] + 400
    assert res[FF] == line[FF] + 2 * 10 + 8 * 8 * 2 + 600
    # float32 at a distance of 4: four partial maxima a lane and the output word, a compare each (three join them)
    res, line = pool_resources(n, 8, "float32", caps, distance=4), _line(n, "float32", caps)
    assert res[DSP] == 0
    assert res[LUT] == line[LUT] + 2 * (128 + 16) + 8 * POOL_COMPARE_LUT["float32"] * 4 + 400
    assert res[FF] == line[FF] + 2 * 10 + 8 * 32 * 5 + 600


def test_the_branch_fifo_holds_what_the_other_path_reads_ahead():
    """``branch_lag`` against a count by hand: the 1×1 stride-2 stage reads pixel (2y, 2x) for its output (y, x)
    as its window sends it; the other path (3×3 stride 2, then 3×3 stride 1) has read, when it gives its pixel k,
    the rows its windows reach. The lag is the most pixels the path is ahead at any output pixel."""
    layers, _, _, _ = branched()
    path = [stage_layer(layers[2].shape), stage_layer(layers[3].shape)]
    down = stage_layer(layers[4].shape)
    lag = branch_lag(path, down)
    ahead = []
    for k in range(9):  # compose the path's reads by hand, then take the downsampling stage's own
        p = consumed(path[1])[k] - 1
        p = consumed(path[0])[p] - 1
        ahead.append(p + 1 - consumed(down)[k])
    assert lag == max(0, *ahead) and lag > 0
    design = explore_traced(layers, load_board("zcu102"), "int8")
    s = design.stages[4]
    assert (s.in_source, s.skip_source, s.skip_pixels) == (2, 4, 1)  # reads tensor 2, adds tensor 4 (conv2's)
    assert s.in_pixels == lag + 2  # and a pixel a stage of the path for its regroups
    assert dict((r, d) for r, d, _, _ in s.fifos)["in"] == s.in_pixels * -(-16 // s.in_lanes) + 2


def test_a_branch_the_pipeline_does_not_build_is_refused():
    layers, _, _, _ = branched()
    with pytest.raises(HeteroDSEError, match="builds a branch only"):
        explore_pipeline([(c.shape, 1) for c in layers], load_board("zcu102"), "int8",
                         residuals=[None] * 7, inputs=[0, 1, 2, 3, 2, 5, 6])  # a branch that adds nothing


@pytest.fixture(scope="module", params=["float32", "int8"])
def project(request, tmp_path_factory):
    layers, image, _, _ = branched()
    design = explore_traced(layers, load_board("zcu102"), request.param)
    directory = write_pipeline_project(tmp_path_factory.mktemp(request.param) / "hls", design, layers, image,
                                       network="branched")
    return request.param, design, directory


def _mutated(directory, tmp_path, old, new):
    copy = tmp_path / "mutant"
    shutil.copytree(directory, copy)
    src = copy / "src" / "kernel.cpp"
    text = src.read_text()
    assert old in text, old
    src.write_text(text.replace(old, new))
    return copy


def test_the_branched_network_streams_through_as_torch_computes_it(project):
    dtype, design, directory = project
    result = csim(directory)
    assert result.passed, result.output[-800:]
    if dtype == "int8":
        assert result.max_abs_error == 0.0
    assert check_pipeline_trips(directory, result.output) == []
    report = lint(directory)
    assert report.ok, [str(f) for f in report.findings]
    text = (directory / "src" / "kernel.cpp").read_text()
    assert text.count("static void s1_pool(") == 1 and "s1_wload" not in text and "W1[" not in text
    record = json.loads((directory / "design.json").read_text())
    assert record["predicted"]["ops"] == 2 * sum(s.shape.macs for s in design.stages) * 2  # no compares counted


def test_it_runs_as_the_device_does_and_a_branch_fifo_too_shallow_deadlocks(project, tmp_path):
    dtype, design, directory = project
    result = csim(directory, dataflow=True)
    assert result.passed and check_pipeline_trips(directory, result.output) == [], result.output[-600:]
    if dtype == "int8":
        record = json.loads((directory / "design.json").read_text())
        fifo = next(f for f in record["fifos"] if f["stream"].startswith("t2_to_s4"))
        depth = design.stages[4].fifos[0][1]
        assert fifo["depth"] == depth > 2
        shallow, declared = with_fifo_depth(directory, tmp_path / "mutant", fifo["stream"], 2)
        assert declared == depth
        with pytest.raises(HeteroDSEError, match="deadlock: every process waits"):
            csim(shallow, dataflow=True)
        assert csim(shallow).passed  # the sequential C-simulation's streams are unbounded: it cannot see it


def test_a_pool_padded_with_zeros_fails_the_csim_and_the_lint(project, tmp_path):
    dtype, _, directory = project
    lowest = "(data_t)-128" if dtype == "int8" else "-3.40282347e+38f"
    mutant = _mutated(directory, tmp_path, f"const s1_in_t zero = {lowest};", "const s1_in_t zero = 0;")
    assert not csim(mutant).passed
    assert "pool" in [f.check for f in lint(mutant).findings]


def test_a_pool_that_multiplies_is_found_by_the_lint(project, tmp_path):
    _, _, directory = project
    mutant = _mutated(directory, tmp_path, "a[l] > m ? (data_t)a[l] : m;", "a[l] > m ? (data_t)(a[l] * 2) : m;")
    assert [f.check for f in lint(mutant).findings] == ["pool", "pool"]  # both pools' stages


class _Ahead(nn.Module):
    """A 1×1 path beside a 3×3 branch that adds it: the branch's window needs two rows of ``x`` before its first
    pixel, while the path's output, a pixel a pixel read, fills the branch's one-pixel residual FIFO."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.path = nn.Conv2d(8, 8, 1)
        self.branch = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        y = self.path(x)
        return torch.relu(self.branch(x) + y)


def test_a_branch_whose_window_reads_ahead_of_the_path_it_adds_is_refused():
    """The path would run ahead of it past its residual FIFO (a deadlock): its 3×3 window reads the map's next
    row before its first output pixel, while the 1×1 path makes a pixel for each it reads; refused in one
    sentence. ResNet's way round (``Branched``) is built, the path's windows the ones reading ahead."""
    model = _Ahead().eval()
    layers, _ = trace_chain(model, torch.randn(1, 3, 8, 8))
    assert [(c.source, c.residual) for c in layers] == [(-1, None), (0, None), (0, 1)]
    path, reader = stage_layer(layers[1].shape), stage_layer(layers[2].shape)
    assert branch_ahead([path], reader) > 0 and branch_ahead([reader], path) == 0
    with pytest.raises(HeteroDSEError, match="would run ahead of it past its residual FIFO"):
        explore_traced(layers, load_board("zcu102"), "int8")
    flat, _, _, _ = branched()
    assert explore_traced(flat, load_board("zcu102"), "int8").stages[4].in_source == 2


def test_explore_says_on_the_console_why_a_network_has_no_pipeline():
    """The refusal is the sentence report.md gives, on explore's console too (it printed a pipeline line only
    where a project was written); a figure with no project says it is the model's only, and why."""
    from types import SimpleNamespace

    from hetero_dse.cli.explore import _pipeline_line
    from hetero_dse.targets.fpga_network import _pipeline

    graph = SimpleNamespace(model=_Ahead().eval(), example=torch.randn(1, 3, 8, 8), label="ahead")
    record = _pipeline(graph, [], load_board("zcu102"), "int8", 200.0, None, False)
    line = _pipeline_line({"board": "zcu102", "pipeline": record})
    assert line.startswith("zcu102: no layer-pipelined design: ") and line.endswith(record["why"])
    assert "would run ahead of it past its residual FIFO" in line
    modelled = {"stages": 3, "fps": 1234.4, "project_why": "no project written: the network was not given as a module"}
    assert _pipeline_line({"board": "vu9p", "pipeline": modelled}) == (
        "vu9p: layer-pipelined (3 stages): 1234 images a second at batch > 1, by the model only; no project written: "
        "the network was not given as a module")
