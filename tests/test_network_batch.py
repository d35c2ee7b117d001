"""A run of the shared network kernel over a batch (issue 38, item 2's throughput at a given batch): each
convolution once an image, each linear layer once over all the images, its weights read once a run. The model's
figures by hand, the small network C-simulated end to end on a batch of two against torch (float32, and int8 bit
for bit), and the layout's stacking broken on purpose to show the C-simulation catches it."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from cost_models.fpga_network import network_trips
from cost_models.fpga_network_units import batched, explore_throughput, over_batch
from hetero_dse.network_report import _throughput_note
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import load_board
from hetero_dse.hls.csim import csim
from hetero_dse.hls.network_lint import lint_network
from hetero_dse.hls.network_project import check_trips, write_network_project
from hetero_dse.hls.network_run import per_image
from hetero_dse.model.layer_shape import LayerShape
from small_net import designed_run, small_design

torch = pytest.importorskip("torch")

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")

CONV = LayerShape("grid", 16, 32, 8, 8, 3, 3, 1, 1, name="conv")
FC = LayerShape("grid", 2048, 10, 1, 1, name="fc")


def test_a_batch_runs_each_convolution_an_image_and_each_linear_layer_once_over_it():
    assert over_batch(FC) and not over_batch(CONV)
    assert not over_batch(LayerShape("depthwise", 16, 16, 1, 1))  # one channel a lane: not a matrix product
    assert batched([(CONV, 2), (FC, 1)], 1) == [(CONV, 2), (FC, 1)]
    assert batched([(CONV, 2), (FC, 1)], 4) == [(CONV, 8), (replace(FC, W=4, images=4), 1)]


def test_a_linear_layer_over_a_batch_reads_its_weights_once_by_the_models_count():
    # ResNet-18's classifier on vu9p: its 512 x 1000 weights are most of what it reads; over 4 images as 4 pixels
    # of one tile, the weight process moves the same words as for one image, and the output 4 times as many
    design = explore_throughput([(LayerShape("grid", 512, 1000, 1, 1, name="fc"), 1)], load_board("vu9p"), "int8",
                                images=4)
    (p,) = design.layers
    assert (p.layer.W, p.shape.images, p.count, design.images) == (4, 4, 1, 4)
    e = design.engines["grid"]
    assert p.tiles.tw == 4  # the explorer's tile over the batch: its weights once
    one = network_trips(e, replace(p.layer, W=1), replace(p.tiles, tw=1))
    four = network_trips(e, p.layer, p.tiles)
    assert four["read_w"] == one["read_w"] and four["write"] == 4 * one["write"]
    # images a second: each unit's run of 4 images in the run's latency
    assert design.fps == pytest.approx(design.compute_units * 4 / design.latency_s)
    assert design.to_json()["fps"] == pytest.approx(design.fps) and design.to_json()["images"] == 4
    with pytest.raises(HeteroDSEError, match="a batch of 0 images"):
        explore_throughput([(FC, 1)], load_board("vu9p"), "int8", images=0)


@needs_gxx
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_the_small_network_runs_a_batch_of_two_through_the_kernel_against_torch(tmp_path, dtype):
    layers, design, run, model, x = small_design(dtype, images=2)
    # five layers an image, twice; the linear layer once, over the two images' features side by side
    assert [(p.count, p.layer.W) for p in design.layers][-1] == (1, 2) and design.images == 2
    assert all(p.count == 2 for p in design.layers[:-1])
    assert len(run.layers) == 5 * 2 + 1 and list(run.stacks.values()) == [["layer:8", "layer:9"]]
    assert run.layers[-1].source == "stack:layer:4" and run.layers[-1].reference.shape == (2, 10)
    project = write_network_project(tmp_path / "batch", design, run)
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert result.elements == sum(r.placed.layer.OH * r.placed.layer.OW * r.placed.layer.K for r in run.layers)
    assert check_trips(project, result.output) == []
    report = lint_network(project)
    assert report.ok, [str(f) for f in report.findings]
    with torch.no_grad():
        final = model(x).numpy()
    if dtype == "float32":  # each image's classes: torch's, within float32 rounding
        assert np.allclose(run.layers[-1].reference, final, atol=1e-5)
    else:  # bit for bit against the same integer arithmetic (above); the quantisation's own error within 3 %
        q = run.layers[-1]
        assert result.max_abs_error == 0.0
        assert np.abs(q.reference * q.quant["scale"] - final).max() < 0.03 * np.abs(final).max()
    readme = (project / "README.md").read_text()
    assert "A run takes a batch of 2 images" in readme


def _designed(model, x, dtype="float32"):
    """``model`` traced on the batch ``x`` and designed for a run of it on zcu102 (as ``small_design``)."""
    from hetero_dse.model.chain import trace_chain

    layers, image = trace_chain(model.eval(), x)
    return designed_run("batch", layers, image, load_board("zcu102"), dtype, lanes=(4, 8), algorithm="direct")


@needs_gxx
def test_a_tile_over_the_batch_that_does_not_divide_it_reads_a_guard_of_zeros(tmp_path):
    """A batch of 3 whose linear layer takes 2 images a tile: its second tile reads a pixel past the last image,
    which the stack keeps as a guard of zeros (its pitch 4 pixels), and writes nothing there."""
    from cost_models.fpga_network_choices import placed_cycles

    _, design, run, model, x = small_design("float32", images=3)
    p = design.layers[-1]
    tiles = replace(p.tiles, tw=2)
    timing = {**design.timing, "clock_hz": design.achieved_mhz * 1e6}
    q = replace(p, tiles=tiles, cycles=placed_cycles(design.engines["grid"], p.layer, tiles, False, timing,
                                                     design.achieved_mhz))
    design = replace(design, layers=[*design.layers[:-1], q])
    run = replace(run, layers=[*run.layers[:-1], replace(run.layers[-1], placed=q)])
    project = write_network_project(tmp_path / "guard", design, run)
    table = json.loads((project / "design.json").read_text())["table"]
    assert (table[-1]["W"], table[-1]["tw"], table[-1]["in_pitch"]) == (3, 2, 4)
    result = csim(project)
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    assert check_trips(project, result.output) == []
    assert lint_network(project).ok
    with torch.no_grad():
        assert np.allclose(run.layers[-1].reference, model(x).numpy(), atol=1e-5)


@needs_gxx
def test_a_1x1_convolution_on_a_pooled_map_runs_over_the_batch(tmp_path):
    """A global pool (an image's depthwise layer), then a 1×1 convolution on its 1×1 map: a matrix product over
    the batch as a linear layer is (its NCHW output the batch's rows), then the classifier over its output."""
    nn = torch.nn

    class Pooled(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.fc = nn.Conv2d(3, 16, 3, 1, 1), nn.Conv2d(16, 16, 1), nn.Linear(16, 10)

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(torch.relu(self.c1(x)), 1)
            return self.fc(torch.flatten(torch.relu(self.c2(x)), 1))

    torch.manual_seed(0)
    model, x = Pooled().eval(), torch.randn(2, 3, 8, 8)
    design, run = _designed(model, x)
    assert [p.shape.images for p in design.layers] == [1, 1, 2, 2]
    assert [r.source for r in run.layers] == ["input:x@0", "input:x@1", "layer:0", "layer:1", "stack:layer:1",
                                              "layer:4"]
    result = csim(write_network_project(tmp_path / "pooled", design, run))
    assert result.passed and result.mismatches == 0, result.output[-2000:]
    with torch.no_grad():
        assert np.allclose(run.layers[-1].reference, model(x).numpy(), atol=1e-5)


@needs_gxx
def test_a_batch_whose_images_are_stacked_out_of_order_fails_the_c_simulation(tmp_path):
    """The linear layer's pixel j must be image j's features: with the stack's images swapped, each image's
    classes are the other's, and the test bench says so."""
    _, design, run, _, _ = small_design("float32", images=2)
    swapped = replace(run, stacks={k: v[::-1] for k, v in run.stacks.items()})
    result = csim(write_network_project(tmp_path / "swapped", design, swapped))
    assert not result.passed and result.mismatches > 0


def test_a_layer_of_an_image_after_a_linear_layer_over_the_batch_is_one_sentence():
    _, design, run, _, _ = small_design("float32")
    linear = run.layers[-1]
    over = replace(linear, placed=replace(linear.placed, shape=replace(linear.placed.shape, images=2)))
    conv = replace(run.layers[0], source="layer:5")
    batch = replace(run, layers=[*run.layers[:-1], over, conv],
                    inputs={k: np.concatenate([v, v]) for k, v in run.inputs.items()})
    batch.layers[:5] = [replace(r, reference=np.concatenate([r.reference] * 2)) for r in batch.layers[:5]]
    with pytest.raises(HeteroDSEError, match="a linear layer's output over the batch"):
        per_image(batch, 2)
    with pytest.raises(HeteroDSEError, match="not a batch of 3 images"):
        per_image(batch, 3)


def test_the_report_says_the_batch_a_compute_unit_runs():
    engines = [{"kind": "grid", "lanes": {"output-channel": 16, "input-channel": 32}}]
    t = {"compute_units": 2, "fps": 1234.0, "latency_s": 0.0032, "engines": engines, "units_stop": "the DSPs are full",
         "images": 4, "directory": "network-x/vu9p/hls-units"}
    note = _throughput_note({"throughput": t})
    assert "At batch 4, **2 compute units** (each grid 16 × 32 lanes, in runs of 4 images, the linear layers once " \
           "over a run, 3.2 ms a run) run 1234 images a second" in note
    assert "No more units: the DSPs are full." in note
    note = _throughput_note({"throughput": {**t, "images": 1}})
    assert "At batch > 1, **2 compute units** (each grid 16 × 32 lanes, each image on one, 3.2 ms each)" in note
    assert "No more: the DSPs are full." in note
