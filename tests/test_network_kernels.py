"""Kernels of different sizes in one xclbin, one an SLR room (issue 38): where a platform's shell takes part of one
SLR, each room gets the network kernel explored for it. The model's set against the rooms by hand, the set written
as projects that each C-simulate against torch, the set's lint on them, and the link file, the SLRs and the banks
broken on purpose to show the lint says so."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from types import MappingProxyType

import pytest

from cost_models.fpga_network_kernels import explore_slr_kernels
from cost_models.fpga_slrs import slr_room
from hetero_dse.hardware.board import RESOURCE_KINDS, load_board
from hetero_dse.hls.csim import csim
from hetero_dse.hls.kernel_set import lint_kernel_set, set_kernels, write_kernel_set
from hetero_dse.hls.network_project import check_trips
from hetero_dse.model.layer_shape import shape_of
from hetero_dse.network_report import _throughput_note
from small_net import TINY_MODEL

torch = pytest.importorskip("torch")

DSP = RESOURCE_KINDS.index("dsp")


def shelled_board():
    """vu9p cut down to three SLRs whose middle one the shell takes half of (300, 150 and 300 DSPs; 210 and 105 of
    them kernels' at the board's usable 70 %), as a platform's shell does on vu9p and u200, at a size where the
    tiny network's kernels differ by room."""
    per = [{"dsp": d, "bram18k": 200, "uram": 0, "lut": 120_000, "ff": 240_000} for d in (300, 150, 300)]
    return replace(load_board("vu9p"), name="vu9p-shelled",
                   resources=MappingProxyType({k: sum(p[k] for p in per) for k in per[0]}),
                   slr_resources=tuple(MappingProxyType(p) for p in per))


@pytest.fixture(scope="module", autouse=True)
def board_known():
    """The lint and the C-simulation read a project's board by its name: the shelled board's is given them."""
    import sys

    import hetero_dse.hardware.board as boards

    original = boards.load_board

    def load(name):
        return shelled_board() if str(name) == "vu9p-shelled" else original(name)

    with pytest.MonkeyPatch.context() as patch:
        for module in [m for name, m in sys.modules.items() if name.startswith("hetero_dse")]:
            if getattr(module, "load_board", None) is original:
                patch.setattr(module, "load_board", load)
        yield


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny model's operators and its network-kernel shapes (as ``explore --model`` takes them)."""
    from hetero_dse.cli.model import capture_model
    from hetero_dse.targets.fpga_network import _reads_network_input

    path = tmp_path_factory.mktemp("model") / "tiny.py"
    path.write_text("\n".join(line[8:] for line in TINY_MODEL.splitlines()))
    graph = capture_model(str(path), None)
    ops = graph.operators()
    shapes = [(shape_of(op, from_host=_reads_network_input(op, graph)), layer.count)
              for op, layer in zip(ops, graph.layers, strict=True)]
    return ops, shapes


def test_each_slr_room_gets_the_kernel_explored_for_it(tiny):
    _, shapes = tiny
    board = shelled_board()
    rooms = slr_room(board)
    assert [round(r[DSP]) for r in rooms] == [210, 105, 210]  # 70 % of what the shell leaves each
    kernels = explore_slr_kernels(shapes, board, "int8")
    big, small = kernels.kernels
    # SLR0's and SLR2's rooms alike: one kernel, a unit on each; SLR1's its own, its units' banks after theirs
    assert (big.compute_units, big.unit_slrs, big.first_unit) == (2, (0, 2), 0)
    assert (small.compute_units, small.unit_slrs, small.first_unit) == (1, (1,), 2)
    assert big.w_ports == small.w_ports  # one bank plan for all the units
    assert big.resources["dsp"] / 2 <= 210 and small.resources["dsp"] <= 105 < big.resources["dsp"] / 2
    assert big.achieved_mhz == small.achieved_mhz  # one kernel clock for the xclbin
    assert kernels.compute_units == 3 and kernels.resources["dsp"] == big.resources["dsp"] + small.resources["dsp"]
    # (the tool keeps the set where it runs more images a second than the compute units of one kernel; on this
    # tiny network five small units do: ``network_designs``)
    # a part whose SLRs are alike, or one die: the compute units of one kernel are the design
    even = replace(board, slr_resources=tuple(board.slr_resources[0] for _ in range(3)))
    assert explore_slr_kernels(shapes, even, "int8") is None
    assert explore_slr_kernels(shapes, load_board("zcu102"), "int8") is None


@pytest.fixture(scope="module")
def project(tiny, tmp_path_factory):
    ops, shapes = tiny
    kernels = explore_slr_kernels(shapes, shelled_board(), "int8")
    directory, ran = write_kernel_set(tmp_path_factory.mktemp("set") / "hls-slrs", kernels, ops)
    assert ran == [len(shapes)] * 2
    return directory, kernels


@pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")
def test_each_kernel_of_the_set_runs_the_network_against_torch_and_the_set_lints_clean(project):
    directory, kernels = project
    tops = [p.name for p in set_kernels(directory)]
    assert tops == ["network_kernel_a", "network_kernel_b"]
    for kernel in set_kernels(directory):
        result = csim(kernel)
        assert result.passed and result.mismatches == 0 and result.max_abs_error == 0.0, result.output[-2000:]
        assert check_trips(kernel, result.output) == []
    report = lint_kernel_set(directory)  # each kernel's lint and the set's own
    assert report.ok, [str(f) for f in report.findings]
    assert report.pragmas_checked > 0
    cfg = (directory / "connectivity.cfg").read_text()
    assert "nk=network_kernel_a:2:network_kernel_a_1.network_kernel_a_2" in cfg
    assert "nk=network_kernel_b:1:network_kernel_b_1" in cfg
    assert "slr=network_kernel_a_2:SLR2" in cfg and "slr=network_kernel_b_1:SLR1" in cfg
    # the set's record and README: its images a second, each kernel's
    record = json.loads((directory / "kernels.json").read_text())
    assert record["fps"] == pytest.approx(kernels.fps) and [k["unit_slrs"] for k in record["kernels"]] == [[0, 2], [1]]
    assert f"{kernels.fps:.1f} images a second together" in (directory / "README.md").read_text()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_sets_makefile_links_every_kernels_object_and_runs_every_host(project):
    directory, _ = project
    dry = subprocess.run(["make", "-n", "xclbin", "run", "TARGET=hw", "PLATFORM=xilinx_u200"], cwd=directory,
                         capture_output=True, text=True, check=True).stdout
    link = next(line for line in dry.splitlines() if line.startswith("v++ -l"))
    assert "network_kernel_a/network_kernel_a.hw.xo" in dry and "network_kernel_b/network_kernel_b.hw.xo" in dry
    assert "-o network.hw.xclbin" in link and "--config connectivity.cfg" in link
    assert "./host.exe ../network.hw.xclbin data" in dry
    assert "KERNELS = network_kernel_a network_kernel_b\n" in (directory / "Makefile").read_text()


@pytest.mark.parametrize("breaking, words", [
    (lambda d: _edit(d / "connectivity.cfg", "slr=network_kernel_b_1:SLR1\n", ""), "missing"),
    (lambda d: _edit(d / "connectivity.cfg", "slr=network_kernel_b_1:SLR1", "slr=network_kernel_b_1:SLR0"),
     "no kernel of the set has this line"),
    (lambda d: _twice(d / "connectivity.cfg", "sp=network_kernel_b_1."), "given twice"),
    # the small kernel placed beside a big one in SLR0, its own files and the set's agreeing: the room says no
    (lambda d: [_edit(p, "SLR1", "SLR0") for p in (d / "connectivity.cfg", d / "network_kernel_b" / "connectivity.cfg")]
     and _design(d / "network_kernel_b", unit_slrs=[0]), "SLR0 holds units of the set's kernels"),
    # a kernel whose units take the banks of the units before it
    (lambda d: _design(d / "network_kernel_b", first_unit=0), "its units' banks are those from unit 0 on"),
    # kernels of two clocks, or of two bank plans
    (lambda d: _design(d / "network_kernel_b", achieved_mhz=200.0), "v++ links an xclbin's kernels on one clock"),
    (lambda d: _design(d / "network_kernel_b", weight_ports=3), "only where every kernel has as many weight ports"),
    # banks of a kilobyte: the kernels' buffers together past them
    ("banks", "of the kernels' buffers; it has 0.0 MB"),
], ids=["line-dropped", "slr-moved", "line-twice", "room", "first-unit", "clock", "weight-ports", "banks"])
def test_each_break_of_the_set_is_a_lint_finding(project, tmp_path, monkeypatch, breaking, words):
    directory, _ = project
    copy = tmp_path / "broken"
    shutil.copytree(directory, copy)
    if breaking == "banks":
        import cost_models.fpga_network_memory as memory

        monkeypatch.setattr(memory, "bank_bytes", lambda m: 1000)
    else:
        breaking(copy)
    findings = [str(f) for f in lint_kernel_set(copy).findings]
    assert any(words in f for f in findings), findings


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1))


def _twice(path, start):
    """``path`` with its first line that begins ``start`` given again."""
    lines = path.read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.startswith(start))
    path.write_text("".join([*lines[:i + 1], lines[i], *lines[i + 1:]]))


def _design(project, **changes):
    path = project / "design.json"
    record = json.loads(path.read_text())
    if "first_unit" in changes and changes["first_unit"] == 0:
        record["design"].pop("first_unit", None)
        changes.pop("first_unit")
    record["design"].update(changes)
    path.write_text(json.dumps(record))


def test_the_report_says_which_kernels_run_where():
    engines = [{"kind": "grid", "lanes": {"output-channel": 8, "input-channel": 8}}]
    t = {"fps": 300.0, "units_fps": 250.0, "units_stop": "4 compute units run no more images a second (240 fps)",
         "images": 1, "directory": "network-tiny/vu9p/hls-slrs",
         "kernels": [{"top": "network_kernel_a", "unit_slrs": [0, 2], "latency_s": 0.008, "engines": engines},
                     {"top": "network_kernel_b", "unit_slrs": [1], "latency_s": 0.02, "engines": engines}]}
    note = _throughput_note({"throughput": t})
    assert ("**2 kernels in one xclbin, each explored for its SLR's room** (`network_kernel_a` grid 8 × 8 lanes on "
            "SLRs 0, 2, 8 ms a run; `network_kernel_b` grid 8 × 8 lanes on SLR 1, 20 ms a run) run 300 images a "
            "second, against 250 for compute units of one kernel") in note


@pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")
def test_the_network_gets_the_set_where_it_runs_more_images_a_second(tmp_path, monkeypatch):
    """``explore --model``'s throughput design is the set where it beats the compute units of one kernel (here the
    units held to one, so that it does): its record, its project beside the batch-1 design's, C-simulated and
    linted, and the report's sentence."""
    from hetero_dse.cli.model import capture_model
    from hetero_dse.network_report import network_markdown
    from hetero_dse.targets import fpga_network
    from hetero_dse.targets.fpga import FpgaTarget

    real = fpga_network.explore_throughput

    def one_unit(*args, **kwargs):
        design = real(*args, **kwargs)
        design.compute_units, design.unit_slrs = 1, ()
        return design

    monkeypatch.setattr(fpga_network, "explore_throughput", one_unit)
    path = tmp_path / "tiny.py"
    path.write_text("\n".join(line[8:] for line in TINY_MODEL.splitlines()))
    graph = capture_model(str(path), None)
    out = tmp_path / "out"
    record = fpga_network.network_designs(FpgaTarget(shelled_board(), dtypes=["int8"], csim=True), graph, [], "int8",
                                          out)
    t = record["throughput"]
    assert [k["top"] for k in t["kernels"]] == ["network_kernel_a", "network_kernel_b"] and t["fps"] > t["units_fps"]
    assert t["directory"] == "network-tiny/vu9p-shelled/hls-slrs" and (out / t["directory"] / "kernels.json").is_file()
    assert t["check"]["passed"] is True and t["check"]["mismatches"] == 0 and t["lint"]["ok"] is True
    text = "\n".join(network_markdown({"networks": [{**record, "board": "vu9p-shelled"}]}))
    assert f"run {t['fps']:.0f} images a second, against {t['units_fps']:.0f} for compute units of one kernel" in text
    assert f"its project `{t['directory']}`, C-simulated against its reference: passed" in text
    assert "than the compute units above" not in text


@pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")
def test_lint_and_csim_take_a_set_as_they_take_a_project(project, cli):
    directory, _ = project
    r = cli("lint", directory)
    assert r.code == 0 and r.out.count("PASS") == 1 and str(directory) in r.out, r.out + r.err
    r = cli("csim", directory)
    assert r.code == 0, r.out + r.err
    for top in ("network_kernel_a", "network_kernel_b"):
        assert f"PASS  {directory / top}  elements=" in r.out
