"""The layer-pipelined accelerator's code (issue 38, item 5): a small network traced from torch, one stage a
layer, C-simulated end to end (two images streamed through one kernel call; float32 against torch, int8 bit
for bit against the same integer arithmetic), every process's trip count against the model's, the lint on the
code, and each check broken on purpose to show it fails."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

from dataclasses import replace

import pytest

from cost_models.fpga_pipeline import (
    explore_pipeline,
    explore_traced,
    line_storage,
    stage_fifos,
    stage_regroups,
    stage_time,
    stream_trips,
    weights_storage,
)
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import load_board
from hetero_dse.hls.csim import csim
from hetero_dse.hls.lint import lint
from hetero_dse.hls.pipeline_project import check_pipeline_trips, write_pipeline_project
from small_net import three_slr_board, traced, with_fifo_depth

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


#: lanes that leave every tensor in part-folds (the balance may choose any count on a side's ladder): the image's
#: 27 im2col channels read on 12 lanes (36) in words of 8 (40); dw, c4 and c5 read fewer channels than the
#: tensor before them holds (24 of c1's, 32 of 36); every edge but c4's residual joins other lanes, so five
#: regroups stand between producers and consumers; c4 adds a residual
#: of 36 channels; fc's weight row of 12 × 2 ends in part of a 16-element word, read from DDR each image
RAGGED = {"c1": (12, 12), "dw": (1, 8), "pw": (12, 12), "c4": (8, 12), "c5": (8, 12), "fc": (12, 2)}


def _ragged(design):
    """The design with the stages' lanes of ``RAGGED``, their cycles and memories as the model gives them; its
    classifier (one output pixel) reads its weights from DDR each image, its reader's trips in its cycles."""
    caps = {k: float(v) for k, v in design.board.caps.items()}
    port = design.board.memory.port_bits // (8 * (1 if design.dtype == "int8" else 4))

    def stage(s, p, q):
        streamed = s.shape.name == "fc"
        cycles = max(stage_time(s.layer, p, q, design.distance), stream_trips(s.layer, p, q, port) if streamed else 0)
        return replace(s, in_lanes=p, out_lanes=q, cycles=cycles,
                       weights="ddr" if streamed else weights_storage(s.layer, p, q, design.dtype, caps),
                       line=line_storage(s.layer, p, q, design.dtype, caps),
                       fifos=stage_fifos(s.layer, p, q, design.dtype, caps, s.shape.residual, s.skip_pixels))

    stages = [stage(s, *RAGGED[s.shape.name]) for s in design.stages]
    return replace(design, stages=stages, regroups=stage_regroups(stages, port))


@pytest.fixture(scope="module", params=[("float32", "zcu102"), ("int8", "zcu102"), ("int8", "vu9p"),
                                        ("int8", "ragged"), ("int8", "slrs")],
                ids=["float32", "int8", "int8-vu9p", "int8-ragged", "int8-slrs"])
def project(request, tmp_path_factory):
    """The small network's pipeline; on vu9p, a part with UltraRAM, its stages start with wider weight rows;
    ``ragged``: on zcu102 with the lanes of ``RAGGED``; ``slrs``: on SLRs too small for it as one kernel, so cut
    into three, one an SLR, joined by streams."""
    dtype, board = request.param
    layers, image, _, _ = traced()
    part = three_slr_board() if board == "slrs" else load_board(board.replace("ragged", "zcu102"))
    design = explore_traced(layers, part, dtype)
    assert (len(design.kernels) == 3) == (board == "slrs")
    if board == "ragged":
        design = _ragged(design)
    directory = write_pipeline_project(tmp_path_factory.mktemp(dtype) / "hls", design, layers, image,
                                       network="small")
    return dtype, design, directory


def _mutated(project, tmp_path, old: str, new: str, count: int = 1):
    """A copy of the project with ``old`` replaced by ``new`` in its kernel (broken on purpose)."""
    copy = tmp_path / "mutant"
    shutil.copytree(project, copy)
    src = copy / "src" / "kernel.cpp"
    text = src.read_text()
    assert old in text, f"the mutation's target {old!r} is not in the generated kernel"
    src.write_text(text.replace(old, new, count))
    return copy


def test_the_network_streams_through_the_pipeline_as_torch_computes_it(project):
    dtype, design, directory = project
    result = csim(directory)
    assert result.passed, result.output[-800:]
    q = design.stages[-1].out_lanes
    assert result.elements == 2 * -(-10 // q) * q  # two images, ten logits padded to the last stage's lanes
    text = (directory / "src" / "kernel.cpp").read_text()
    if design.stages[0].in_lanes == 12:  # the ragged lanes: the cases they are there for are in the code
        assert text.count("static void regroup_") == 5 and "the row's last word is part padding" in text
        # the image's 27 im2col channels on 12 lanes are 36, in 5 words of 8: 40 channels a pixel in DDR
        assert "IMG_V = 8," in (directory / "src" / "kernel.h").read_text()
        assert "A pixel's 5 words of 8 regrouped as 3 of 12 for t0_to_s0" in text
    if dtype == "int8":
        assert result.max_abs_error == 0.0
    assert not result.warnings
    assert check_pipeline_trips(directory, result.output) == []
    report = lint(directory)
    assert report.ok, [str(f) for f in report.findings]
    record = json.loads((directory / "design.json").read_text())
    # the residual waits in a FIFO as deep as the model charges: its pixels, a fold of the adding stage's output
    # lanes a word, and two words of slack; every other FIFO holds two words
    skips = [f for f in record["fifos"] if "_skip_" in f["stream"] and not f["stream"].endswith("_a")]
    assert [f["depth"] for f in skips] == [s.skip_pixels * -(-s.layer.K // s.out_lanes) + 2
                                           for s in design.stages if s.shape.residual]
    assert all(f["depth"] == 2 for f in record["fifos"] if f not in skips)


def test_the_pipeline_runs_as_the_device_does_and_a_residual_fifo_too_shallow_deadlocks(project, tmp_path):
    """C-simulated as the device runs it (``csim(dataflow=True)``: each process a thread, each FIFO as deep as its
    type says, the lint holding that to the model's), the pipeline gives the same result and trips. Its residual's
    FIFO two words deep, the processes deadlock and the C-simulation says so, where the sequential one (unbounded
    streams, as Vitis's C-simulation) passes the same code."""
    dtype, design, directory = project
    result = csim(directory, dataflow=True)
    assert result.passed and check_pipeline_trips(directory, result.output) == [], result.output[-600:]
    if dtype == "int8" and design.stages[0].in_lanes == 12:  # the ragged project: one case of the break
        record = json.loads((directory / "design.json").read_text())
        skip = next(f for f in record["fifos"] if "_skip_" in f["stream"] and not f["stream"].endswith("_a"))
        assert skip["depth"] > 2
        shallow, declared = with_fifo_depth(directory, tmp_path / "mutant", skip["stream"], 2)
        assert declared == skip["depth"]
        with pytest.raises(HeteroDSEError, match="deadlock: every process waits"):
            csim(shallow, dataflow=True)
        assert csim(shallow).passed
        assert [f.check for f in lint(shallow).findings] == ["fifo"]
        # another kind of project's processes are calls, not threads: refused in one sentence
        record["architecture"] = "network"
        (shallow / "design.json").write_text(json.dumps(record))
        with pytest.raises(HeteroDSEError, match="is not a layer pipeline's project"):
            csim(shallow, dataflow=True)


def test_a_window_that_reads_the_edge_for_the_padding_fails_the_csim(project, tmp_path):
    _, _, directory = project
    mutant = _mutated(directory, tmp_path, "= inside ? lb[", "= true ? lb[")
    assert not csim(mutant).passed


def test_a_missing_residual_add_fails_the_csim(project, tmp_path):
    dtype, _, directory = project
    if dtype == "int8":
        mutant = _mutated(directory, tmp_path, "o += (int)(((int)res[l]", "o -= (int)(((int)res[l]")
    else:
        mutant = _mutated(directory, tmp_path, "v = v + (acc_t)res[l];", "v = v - (acc_t)res[l];")
    assert not csim(mutant).passed


def test_a_clamp_to_the_wrong_bound_is_a_lint_finding_though_the_images_pass(project, tmp_path):
    """A saturation the test images never reach cannot fail the C-simulation (``bench/pipeline_mutants.py`` found
    an int8 stage clamping to 1 above 127 that every image passed): the lint holds each stage's clamp to
    design.json's bounds."""
    dtype, design, directory = project
    text = (directory / "src" / "kernel.cpp").read_text()
    first = re.search(r"(\w) = \1 < ([^?]+?) \? ([^:]+?) : \(\1 > ([^?]+?) \? ([^:]+?) : \1\);", text)
    record = json.loads((directory / "design.json").read_text())
    clamps = {c["stage"]: (c["lo"], c["hi"]) for c in record["clamps"]}
    assert set(clamps) == {i for i, s in enumerate(design.stages) if s.layer.engine != "maxpool"}
    if dtype == "int8":
        assert all(-128 <= lo <= hi <= 127 for lo, hi in clamps.values()) and first.group(5) == "127"
    wrong = "1" if dtype == "int8" else "(acc_t)1.0f"
    mutant = _mutated(directory, tmp_path, first.group(0), first.group(0).replace(f"? {first.group(5)} :",
                                                                                   f"? {wrong} :"))
    findings = lint(mutant).findings
    assert [f.check for f in findings] == ["clamp"] and f"clamps to {first.group(3)} and {wrong}" in str(findings[0])


def test_a_partial_sum_that_starts_or_idles_off_zero_is_a_lint_finding(project, tmp_path):
    """An int32 sum one off survives the requantising shift (the mutation test found five such that every image
    passed): the lint holds each accumulation to zero at its fold's first trip and on an idle one."""
    _, _, directory = project
    text = (directory / "src" / "kernel.cpp").read_text()
    line = re.search(r"acc\[t % \d+\]\[l\] = \(t < \d+ \? \(acc_t\)0 : [^;]*\(live \? \w+ : \(acc_t\)0\);", text)[0]
    idle, first = line.replace("(acc_t)0);", "(acc_t)1);"), line.replace("? (acc_t)0 :", "? (acc_t)1 :")
    for n, broken in enumerate((idle, first)):
        findings = lint(_mutated(directory, tmp_path / str(n), line, broken)).findings
        assert [f.check for f in findings] == ["accumulate"], [str(f) for f in findings]


def test_a_packed_chains_borrow_off_its_sign_is_a_lint_finding(project, tmp_path):
    dtype, _, directory = project
    if dtype != "int8":
        pytest.skip("float32 does not pack")
    findings = lint(_mutated(directory, tmp_path, "(low < 0 ? 1 : 0)", "(low < -1 ? 1 : 0)")).findings
    assert [f.check for f in findings] == ["lanes"] and "signed correction" in str(findings[0])


def test_a_loop_the_model_does_not_charge_fails_the_trip_check(project, tmp_path):
    _, _, directory = project
    mutant = _mutated(directory, tmp_path, "HDSE_COUNT(hdse_mac_trips[2]);",
                      "HDSE_COUNT(hdse_mac_trips[2]); HDSE_COUNT(hdse_mac_trips[2]);")
    result = csim(mutant)
    assert result.passed  # the arithmetic is right: only the trip check sees the extra iteration
    problems = check_pipeline_trips(mutant, result.output)
    assert len(problems) == 1 and "stage 2: its mac process ran" in problems[0]


def test_the_lint_holds_the_fifos_lanes_and_accumulation_to_the_design(project, tmp_path):
    _, design, directory = project
    skip = next(f for f in json.loads((directory / "design.json").read_text())["fifos"] if "_skip_" in f["stream"])
    shallow = _mutated(directory, tmp_path, f"variable={skip['stream']} depth={skip['depth']}",
                       f"variable={skip['stream']} depth=2")
    assert [f.check for f in lint(shallow).findings] == ["fifo"]
    shutil.rmtree(shallow)
    serial = _mutated(directory, tmp_path, "  #pragma HLS DATAFLOW\n", "")
    assert [f.check for f in lint(serial).findings] == ["dataflow"]
    shutil.rmtree(serial)
    d = design.distance
    text = (directory / "src" / "kernel.cpp").read_text()
    first = f"acc[t % {d}][l] = (t < {d} ?"
    assert first in text
    rotated = _mutated(directory, tmp_path, first, f"acc[t % {d + 1}][l] = (t < {d} ?")
    assert "dependence" in [f.check for f in lint(rotated).findings]


def test_each_fifo_is_as_deep_wide_and_bound_as_the_model_charges_it(project, tmp_path):
    """Every FIFO the code declares is one the model charges (``stage_fifos``, each regroup's input, the result's
    port words), as wide and in the same memory; a FIFO left to Vitis, one of wider words than the model charges,
    and one bound elsewhere are each found."""
    import numpy as np

    from cost_models.fpga_pipeline_storage import fifo_storage
    from hetero_dse.hardware.board import RESOURCE_KINDS

    dtype, design, directory = project
    record = json.loads((directory / "design.json").read_text())
    caps = {k: float(v) for k, v in design.board.caps.items()}
    built = np.zeros(len(RESOURCE_KINDS))
    for f in record["fifos"]:
        assert fifo_storage(f["depth"], f["bits"], caps, built) == f["memory"], f
    charged = np.zeros(len(RESOURCE_KINDS))
    for s in design.stages:
        for _, depth, bits, _ in s.fifos:
            fifo_storage(depth, bits, caps, charged)
    elem = 8 * np.dtype(dtype).itemsize
    out_v = int(re.search(r"OUT_V = (\d+)", (directory / "src" / "kernel.h").read_text()).group(1))
    fifo_storage(2, out_v * elem, caps, charged)
    for g in design.regroups:
        fifo_storage(2, g.in_lanes * elem, caps, charged)
    assert np.array_equal(built, charged), (built, charged)
    assert len(record["fifos"]) == sum(len(s.fifos) for s in design.stages) + 1 + len(design.regroups)
    text = (directory / "src" / "kernel.cpp").read_text()
    unbound = re.search(r"  #pragma HLS BIND_STORAGE variable=(\w+) type=fifo impl=srl\n", text)
    assert [f.check for f in lint(_mutated(directory, tmp_path / "unbound", unbound.group(0), "")).findings] == [
        "fifo"]
    skip = next(f for f in record["fifos"] if "_skip_" in f["stream"] and not f["stream"].endswith("_a"))
    other = "lutram" if skip["memory"] != "lutram" else "bram"
    moved = _mutated(directory, tmp_path / "moved", f"variable={skip['stream']} type=fifo impl={skip['memory']}",
                     f"variable={skip['stream']} type=fifo impl={other}")
    assert [f.check for f in lint(moved).findings] == ["fifo"]
    # a stage's input words wider than the model charges (its window's lanes twice over)
    header = (directory / "src" / "kernel.h").read_text()
    typedef = re.search(r"typedef hls::vector<data_t, (\d+)> (s\d+_in_t);", header)
    wide = tmp_path / "wide"
    shutil.copytree(directory, wide)
    (wide / "src" / "kernel.h").write_text(header.replace(typedef.group(0), typedef.group(0).replace(
        f"data_t, {typedef.group(1)}>", f"data_t, {2 * int(typedef.group(1))}>")))
    assert "fifo" in {f.check for f in lint(wide).findings}


def test_each_regroup_is_the_models_and_breaking_one_fails(project, tmp_path):
    """Where a producer's words and its consumer's lanes differ a regroup stands between them, as the model
    charges it (its kind, lanes and trips): a gather where the consumer's word is whole producer's words (a trip
    an input word), a split where the producer's word is whole consumer's words (a trip an output word), else the
    pixel in a register (both counts). A regroup's loop a pixel short is found by the lint; words regrouped in
    the wrong order fail the C-simulation, in each kind the projects here have."""
    _, design, directory = project
    record = json.loads((directory / "design.json").read_text())
    groups = record["design"]["regroups"]
    assert groups, "every project here joins some producer to a consumer of other lanes"
    per = {"gather": lambda g: g["in_words"], "split": lambda g: g["out_words"],
           "pixel": lambda g: g["in_words"] + g["out_words"]}
    for g in groups:
        assert g["trips"] == g["pixels"] * per[g["kind"]](g)
        assert g["in_lanes"] != g["out_lanes"]
        if g["kind"] == "gather":
            assert g["out_lanes"] == g["ratio"] * g["in_lanes"]
        if g["kind"] == "split":
            assert g["in_lanes"] == g["ratio"] * g["out_lanes"]
    g = groups[-1]
    text = (directory / "src" / "kernel.cpp").read_text()
    bound = f"it < (long)frames * {g['trips']};"
    assert bound in text
    short = _mutated(directory, tmp_path / "short", bound, f"it < (long)frames * {g['trips'] - per[g['kind']](g)};")
    assert "regroup" in {f.check for f in lint(short).findings}
    broken = {"pixel": lambda g: (f"pix[(f & {g['in_mask']}) * {g['in_lanes']} + j] = v[j];",
                                  f"pix[({g['in_words']} - 1 - f) * {g['in_lanes']} + j] = v[j];"),
              "gather": lambda g: (f"word[(slot & {g['in_mask']}) * {g['in_lanes']} + j] = v[j];",
                                   f"word[(({g['ratio']} - 1 - slot) & {g['in_mask']}) * {g['in_lanes']} + j] = v[j];"),
              "split": lambda g: (f"v[j] = word[(slot & {g['out_mask']}) * {g['out_lanes']} + j];",
                                  f"v[j] = word[(({g['ratio']} - 1 - slot) & {g['out_mask']}) * "
                                  f"{g['out_lanes']} + j];")}
    tried = 0
    for kind in sorted({g["kind"] for g in groups}):
        g = next(x for x in groups if x["kind"] == kind and (x["in_words"] > 1 if kind == "pixel" else True))
        old, new = broken[kind](g)
        assert not csim(_mutated(directory, tmp_path / kind, old, new)).passed, kind
        tried += 1
    assert tried >= 1


def test_a_stage_whose_lanes_differ_from_the_design_is_found(project, tmp_path):
    _, design, directory = project
    copy = tmp_path / "lanes"
    shutil.copytree(directory, copy)
    record = json.loads((copy / "design.json").read_text())
    record["design"]["per_stage"][1]["out_lanes"] *= 2  # the design says twice the lanes the code has
    (copy / "design.json").write_text(json.dumps(record))
    assert {f.check for f in lint(copy).findings} == {"lanes"}


def test_weights_bound_to_another_memory_are_found(project, tmp_path):
    _, design, directory = project
    text = (directory / "src" / "kernel.cpp").read_text()
    bound = re.search(r"BIND_STORAGE variable=W(\d+) type=ram_1p impl=(\w+)", text)
    other = "lutram" if bound.group(2) != "lutram" else "bram"
    mutant = _mutated(directory, tmp_path, bound.group(0), bound.group(0).replace(bound.group(2), other))
    assert [f.check for f in lint(mutant).findings] == ["storage"]


def test_weights_loaded_into_the_wrong_rows_fail_the_csim(project, tmp_path):
    _, _, directory = project
    mutant = _mutated(directory, tmp_path, "W3[r][j] = row[j];", "W3[r == 0 ? 1 : r][j] = row[j];")
    assert not csim(mutant).passed


def test_the_host_program_runs_the_pipeline_through_an_xrt_test_double(project, tmp_path):
    """host/host.cpp (XRT's native API: the weights loaded in one run, the images streamed in the next) compiled
    against the project's XRT test double, whose runs call the kernel's C model on the card's copies of the buffers.
    Says nothing about a card."""
    import subprocess

    _, design, directory = project
    host, binary = directory / "host" / "host.cpp", tmp_path / "host.exe"

    def run_host():
        subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas",
                        "-Wno-unused-label", f"-I{directory / 'sim' / 'include'}", f"-I{directory / 'src'}",
                        "-DHDSE_XRT_KERNEL=pipeline_kernel", str(host), str(directory / "src" / "kernel.cpp"), "-o",
                        str(binary)], check=True, capture_output=True)
        return subprocess.run([str(binary), "test_double.xclbin", str(directory / "data")], capture_output=True,
                              text=True)

    ran = run_host()
    assert ran.returncode == 0 and "mismatches=0" in ran.stdout and "PASS" in ran.stdout, ran.stdout + ran.stderr
    if design.dtype == "float32":  # the double keeps each buffer's card copy apart: a sync forgotten on purpose fails
        good = host.read_text()
        for sync in ("image.sync(XCL_BO_SYNC_BO_TO_DEVICE);", "result.sync(XCL_BO_SYNC_BO_FROM_DEVICE);"):
            assert sync in good
            host.write_text(good.replace(sync, ""))
            ran = run_host()
            assert ran.returncode == 1 and "FAIL" in ran.stdout, (sync, ran.stdout + ran.stderr)
        host.write_text(good)
    # a board with an acceleration platform gets the v++ flow's files, one without an IP to drive
    platform = design.board.platform
    assert (directory / "connectivity.cfg").exists() == bool(platform)
    makefile = (directory / "Makefile").read_text()
    assert ("xclbin:" in makefile) == bool(platform) and ("ip:" in makefile) != bool(platform)


def test_the_csim_command_checks_the_pipelines_trips(project):
    import subprocess
    import sys

    _, design, directory = project
    ran = subprocess.run([sys.executable, "-m", "hetero_dse", "csim", str(directory)], capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0 and "trip counts of every process against the model's" in ran.stdout, ran.stdout
    if design.kernels:  # as the device runs it, from the command line too
        ran = subprocess.run([sys.executable, "-m", "hetero_dse", "csim", "--dataflow", str(directory)],
                             capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0 and "PASS" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.parametrize("changes, check", [
    # a core bound to the chain's multiply-add: Vitis would no longer match it into one DSP (UG1399)
    ([("sum += (long long)pair * a[j];", "sum += (long long)pair * a[j];\n#pragma HLS BIND_OP variable=sum op=add "
       "impl=dsp")], "bind_op"),
    # the sum hoisted out of the chain: it runs on over all the stage's lanes, past the low lane's 18 bits
    ([("        long long sum = 0;\n", ""),
      ("      chain: for (int c", "      long long sum = 0;\n      chain: for (int c")], "lanes"),
    # the expression balanced: Vitis may rebuild the chain as a tree of fabric adds
    ([("#pragma HLS EXPRESSION_BALANCE off\n", "")], "lanes"),
])
def test_each_change_to_a_packed_stages_dsp_chain_fails_the_lint(project, tmp_path, changes, check):
    dtype, design, directory = project
    if dtype != "int8":
        pytest.skip("float32 does not pack")
    text = (directory / "src" / "kernel.cpp").read_text()
    assert "sum += (long long)pair * a[j];" in text  # a stage chains its products (not a vacuous test)
    assert lint(directory).ok
    copy = tmp_path / "mutant"
    shutil.copytree(directory, copy)
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    (copy / "src" / "kernel.cpp").write_text(text)
    assert check in [f.check for f in lint(copy).findings]


def test_a_ragged_stages_padding_broken_fails_the_csim(project, tmp_path):
    _, design, directory = project
    if design.stages[0].in_lanes != 12:
        pytest.skip("the ragged lanes' project only")
    # a regroup that puts its input word's lanes one place off: the consumer reads another channel
    assert not csim(_mutated(directory, tmp_path / "line", "pix[(f & 1) * 12 + j] = v[j];",
                             "pix[(f & 1) * 12 + (j == 0 ? 1 : j)] = v[j];")).passed
    # the guard on a weight row's last, part-padding word dropped: lanes past the row, which the sim's vector stops
    with pytest.raises(HeteroDSEError, match="lane past the word"):
        csim(_mutated(directory, tmp_path / "row", "if (w * 16 + j < 24) row[w * 16 + j] = v[j];",
                      "row[w * 16 + j] = v[j];"))


def test_a_classifier_that_reads_its_weights_from_ddr_is_checked(project, tmp_path):
    """The ragged project's classifier reads its weights from DDR each image on a port of its own (the model's
    choice for a stage of one output pixel): rows read from the wrong place fail the C-simulation; the reader's
    port shared with the load's, and an address Vitis would read a beat at a time, are found by the lint."""
    _, design, directory = project
    if design.stages[0].in_lanes != 12:
        pytest.skip("the ragged lanes' project only")
    text = (directory / "src" / "kernel.cpp").read_text()
    assert "static data_t W5[" not in text and "HDSE_PROCESS(s5_wstream(w5, s5_wload, frames));" in text
    record = json.loads((directory / "design.json").read_text())
    assert record["trips"]["stages"][5]["wstream"] > 0 and record["design"]["per_stage"][5]["weights"] == "ddr"
    offset = re.search(r"weights\[(\d+) \+ i\]", text)  # the loop's index plus a constant: one burst an image
    assert not csim(_mutated(directory, tmp_path / "rows", offset.group(0),
                             f"weights[{int(offset.group(1)) - 2} + i]")).passed
    shared = _mutated(directory, tmp_path / "port", "port=w5 offset=slave bundle=gmem3",
                      "port=w5 offset=slave bundle=gmem2")
    assert [f.check for f in lint(shared).findings] == ["storage"]
    beats = _mutated(directory, tmp_path / "beats", offset.group(0), f"weights[{offset.group(1)} + (i ^ 1)]")
    assert [f.check for f in lint(beats).findings] == ["burst"]


def test_kernels_one_an_slr_are_the_models_and_each_broken_link_is_found(project, tmp_path):
    """The pipeline cut into kernels, one an SLR (``fpga_pipeline_slrs``): each kernel runs the model's stages, the
    streams between them are as wide as the model's crossings, connectivity.cfg joins them in order and keeps each
    to the model's SLR; each of these broken on purpose is a lint finding, and a stream between kernels read a
    word short fails the C-simulation."""
    _, design, directory = project
    if not design.kernels:
        pytest.skip("the project cut into kernels only")
    assert [(k.first, k.last, k.slr) for k in design.kernels] == [(0, 2, 0), (3, 3, 1), (4, 5, 2)]
    # the crossings are the cut tensors' words: stage 2's and stage 3's output lanes, int8
    assert [k.crossing_bits for k in design.kernels] == [0, 8 * design.stages[2].out_lanes,
                                                         8 * design.stages[3].out_lanes]
    cfg = (directory / "connectivity.cfg").read_text()
    assert "stream_connect=pipeline_kernel_0_1.stream_out:pipeline_kernel_1_1.stream_in" in cfg
    if shutil.which("make"):  # a kernel object a kernel, all three in one link
        import subprocess

        ran = subprocess.run(["make", "-n", "-C", str(directory), "xclbin"], capture_output=True, text=True,
                             check=True).stdout.replace("\\\n", " ")
        links = [" ".join(line.split()) for line in ran.splitlines() if line.startswith("v++ -l")]
        assert [line.count(".hw.xo") for line in links] == [3], links
        assert ran.count("v++ -c") == 3 and all(f"-k pipeline_kernel_{k} " in ran for k in range(3))
    assert "slr=pipeline_kernel_2_1:SLR2" in cfg and "nk=pipeline_kernel:" not in cfg

    def broken(name, old, new):
        copy = tmp_path / f"broken_{len(list(tmp_path.iterdir()))}"
        shutil.copytree(directory, copy)
        path = copy / name
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new, 1))
        return [f.check for f in lint(copy).findings]

    assert broken("connectivity.cfg", "stream_connect=pipeline_kernel_1_1.stream_out:pipeline_kernel_2_1.stream_in\n",
                  "") == [
        "kernels"]
    assert broken("connectivity.cfg", "slr=pipeline_kernel_1_1:SLR1", "slr=pipeline_kernel_1_1:SLR2") == ["kernels"]
    assert broken("src/kernel.cpp", "#pragma HLS INTERFACE axis port=stream_out register_mode=both",
                  "#pragma HLS INTERFACE ap_fifo port=stream_out") == ["kernels"]
    assert broken("src/kernel.cpp", "axis port=stream_in register_mode=both", "axis port=stream_in") == ["kernels"]
    assert broken("design.json", '"last": 3,', '"last": 4,') == ["kernels"]
    # a port named as an HDL word (the stream_connect names the C name; HLS renames it in the RTL)
    assert "kernels" in broken("src/kernel.cpp", "hls::stream<s2_out_t> &stream_out, const", "hls::stream<s2_out_t> "
                                                                                             "&out, const")
    renamed = max(tmp_path.glob("broken_*"), key=lambda p: int(p.name.split("_")[1]))
    assert any("its port out is a VHDL or Verilog word" in str(f) for f in lint(renamed).findings)
    words = re.search(r"static void link_in_1\(.*?frames \* (\d+);", (directory / "src" / "kernel.cpp").read_text(),
                      re.S).group(1)
    short = _mutated(directory, tmp_path, f"(long)frames * {words}; ++it) {{\n    #pragma HLS PIPELINE II=1\n"
                     "    HDSE_COUNT(hdse_link_trips[1]);",
                     f"(long)frames * {int(words) - 1}; ++it) {{\n    #pragma HLS PIPELINE II=1\n"
                     "    HDSE_COUNT(hdse_link_trips[1]);")
    with pytest.raises(HeteroDSEError, match="read while empty"):  # the stage after it starves
        csim(short)
    # a traced network that reads across a cut (here c5 made to add c1's output) is refused, not written
    layers, image, _, _ = traced()
    layers[4] = SimpleNamespace(**{**layers[4].__dict__, "residual": 0})
    with pytest.raises(HeteroDSEError, match="cut before stage 4, but stage 4 reads a tensor from before the cut"):
        write_pipeline_project(tmp_path / "across", design, layers, image, network="small")
    assert not (tmp_path / "across").exists()


def test_each_ports_bursts_are_the_ones_whose_buffer_the_model_charges(project):
    """Each port's INTERFACE sets bursts of 4 KB of its own words (at most 256 beats); the model charges each
    port's buffer of 4 such bursts in flight at the word whose buffer is largest, so no port builds more than it
    charges."""
    import re

    from cost_models.fpga_costs import NETWORK_OUTSTANDING, axi_buffer_bram18, axi_max_beats
    from cost_models.fpga_pipeline import pipeline_buffers

    dtype, design, directory = project
    header = (directory / "src" / "kernel.h").read_text()
    source = (directory / "src" / "kernel.cpp").read_text()
    elem = 8 if dtype == "int8" else 32
    words = {name: int(re.search(rf"\b{name} = (\d+)", header).group(1)) for name in ("IMG_V", "OUT_V", "WGT_V")}
    built = []
    for port, key, name, write in (("image", "read", "IMG_V", False), ("result", "write", "OUT_V", True),
                                   ("weights", "read", "WGT_V", False)):
        pragma = re.search(rf"INTERFACE m_axi port={port} .*max_{key}_burst_length=(\d+)", source)
        bits = words[name] * elem
        assert pragma and int(pragma.group(1)) == axi_max_beats(bits // 8), port
        built.append(axi_buffer_bram18(axi_max_beats(bits // 8), bits + (bits // 8 if write else 0),
                                       NETWORK_OUTSTANDING))
    charged = [axi_buffer_bram18(beats, bits, NETWORK_OUTSTANDING)
               for bits, beats in pipeline_buffers(design.board.memory.port_bits, elem)]
    assert all(b <= c for b, c in zip(built, charged, strict=True)) and charged[2] == built[2], (built, charged)


XRT_DOUBLE_PROGRAM = r"""
// a kernel that adds one to each of n ints, run through the XRT test double as a host would, defect MODE put in
void add_one(const int *in, int *out, int n) {
  for (int i = 0; i < n; ++i) out[i] = in[i] + 1;
}
#define HDSE_XRT_KERNEL add_one
#include <cstdio>
#include <cstdlib>
#include "xrt/xrt_bo.h"
#include "xrt/xrt_device.h"
#include "xrt/xrt_kernel.h"

int main(int argc, char **argv) {
  const int mode = std::atoi(argv[1]), n = 4;
  (void)argc;
  xrt::device device(0);
  const auto uuid = device.load_xclbin("double.xclbin");
  xrt::kernel kernel(device, uuid, "add_one");
  xrt::bo in(device, sizeof(int) * n, kernel.group_id(0)), out(device, sizeof(int) * n, kernel.group_id(1));
  for (int i = 0; i < n; ++i) in.map<int *>()[i] = 10 * i;
  if (mode != 1) in.sync(XCL_BO_SYNC_BO_TO_DEVICE);        // 1: the input never synced to the card
  xrt::run run = kernel(in, out, n);
  if (mode == 2) {                                         // 2: the input changed and synced after the start
    for (int i = 0; i < n; ++i) in.map<int *>()[i] = 0;
    in.sync(XCL_BO_SYNC_BO_TO_DEVICE);
  }
  if (mode == 3) out.sync(XCL_BO_SYNC_BO_FROM_DEVICE);     // 3: the results read before the run ended
  if (mode != 3 && run.wait(std::chrono::milliseconds(1000)) != ERT_CMD_STATE_COMPLETED) return 3;
  if (mode != 4 && mode != 3) out.sync(XCL_BO_SYNC_BO_FROM_DEVICE);  // 4: the results never synced back
  for (int i = 0; i < n; ++i) std::printf("%d ", out.map<int *>()[i]);
  std::printf("\n");
  return 0;
}
"""


def test_the_xrt_double_runs_the_kernel_as_a_card_would(tmp_path):
    """The XRT test double (``hls_templates/include/xrt``) against a kernel that adds one: the card's copy of a
    buffer apart from the host's, the kernel reading the card's copies as the run starts and writing them when it
    ends, and a hung run's wait with a limit timing out (``HDSE_XRT_HANG``). Each host defect a card would punish
    gives a wrong result here."""
    import os
    import subprocess

    from hetero_dse.resources import data_dir

    source, binary = tmp_path / "double.cpp", tmp_path / "double.exe"
    source.write_text(XRT_DOUBLE_PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{data_dir('hls_templates') / 'include'}",
                    str(source), "-o", str(binary)], check=True, capture_output=True)

    def run(mode, **environment):
        ran = subprocess.run([str(binary), str(mode)], capture_output=True, text=True,
                             env={**os.environ, **environment})
        return ran.returncode, ran.stdout.split()

    stale = str(int.from_bytes(b"\xa5" * 4, "little", signed=True))  # the card's copy before any sync
    assert run(0) == (0, ["1", "11", "21", "31"])
    assert run(1) == (0, [str(int(stale) + 1)] * 4)
    assert run(2) == (0, ["1", "11", "21", "31"])  # the run took the input as it started
    assert run(3) == (0, [stale] * 4)
    assert run(4) == (0, ["0"] * 4)
    assert run(0, HDSE_XRT_HANG="1") == (3, [])


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_a_global_average_pool_runs_as_the_depthwise_stage_it_is(dtype, tmp_path):
    """A global average pool (MobileNet-V2's before its classifier) traces as a depthwise layer of one window of
    the whole image, each weight 1 / (H·W) (in int8 each quantises to 127 exactly); its stage's window reads the
    whole image before its one output pixel. The network streams through the pipeline as torch computes it
    (float32), bit for bit against the integer arithmetic (int8), its trips the model's and its code lint clean."""
    import numpy as np
    import torch
    from torch import nn

    from hetero_dse.model.chain import trace_chain

    class Pooled(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.fc = nn.Conv2d(3, 8, 3, 1, 1), nn.Conv2d(8, 16, 1), nn.Linear(16, 10)

        def forward(self, x):
            x = torch.relu(self.c2(torch.relu(self.c1(x))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(0)
    layers, image = trace_chain(Pooled().eval(), torch.randn(1, 3, 6, 6))
    pool = layers[2]
    assert (pool.shape.engine, pool.shape.R, pool.shape.S, pool.shape.H, pool.shape.pad) == ("depthwise", 6, 6, 6, 0)
    assert np.allclose(pool.weight, 1 / 36) and np.allclose(pool.reference.ravel(),
                                                             layers[1].reference.mean(axis=(2, 3)).ravel())
    design = explore_pipeline([(c.shape, 1) for c in layers], load_board("zcu102"), dtype)
    directory = write_pipeline_project(tmp_path / "hls", design, layers, image, network="pooled")
    result = csim(directory)
    assert result.passed, result.output[-800:]
    if dtype == "int8":
        assert result.max_abs_error == 0.0
    assert check_pipeline_trips(directory, result.output) == []
    assert lint(directory).ok


def test_mobilenet_v2_streams_through_its_pipeline_bit_for_bit(tmp_path):
    """The whole of MobileNet-V2 in int8 (its 54 layers: the global pool a depthwise stage, the classifier's
    weights read from DDR each image) as the pipeline the explorer designs for ZCU102, C-simulated on two images
    bit for bit against the integer arithmetic, every process's trips the model's, its code lint clean."""
    from hetero_dse.model.chain import trace_chain
    from hetero_dse.model.zoo import build, calibrated

    model, example = build("mobilenet_v2")
    layers, image = trace_chain(calibrated(model, example), example)
    design = explore_traced(layers, load_board("zcu102"), "int8")
    assert len(design.stages) == 54 and design.stages[-1].weights == "ddr"
    directory = write_pipeline_project(tmp_path / "hls", design, layers, image, network="mobilenet_v2")
    result = csim(directory)
    assert result.passed and result.max_abs_error == 0.0 and result.elements >= 2 * 1000, result.output[-800:]
    assert check_pipeline_trips(directory, result.output) == []
    assert lint(directory).ok


def test_a_kernel_over_two_slrs_is_written_guided_to_its_first_and_runs_the_same(project, tmp_path):
    """The cut pipeline with its last two kernels as one over SLR1 and SLR2 (``Kernel.also``: what the explorer
    builds where no cut gives every kernel one SLR): two kernels, one stream between them, the second's ``slr=``
    its first SLR and the README saying it is a guide; lint-clean, and the C-simulation's result and trips are
    the three kernels' (bit for bit)."""
    from cost_models.fpga_pipeline_slrs import Kernel

    dtype, design, directory = project
    if not design.kernels:
        pytest.skip("the project cut into kernels only")
    first, second, third = design.kernels
    two = replace(design, kernels=[first, Kernel(second.first, third.last, 1, second.crossing_bits, (), (2,))])
    layers, image, _, _ = traced()
    out = write_pipeline_project(tmp_path / "two", two, layers, image, network="small")
    cfg = (out / "connectivity.cfg").read_text()
    assert re.findall(r"^slr=(\w+):SLR(\d)$", cfg, re.M) == [("pipeline_kernel_0_1", "0"),
                                                              ("pipeline_kernel_1_1", "1")]
    assert re.findall(r"^stream_connect=.*$", cfg, re.M) == [
        "stream_connect=pipeline_kernel_0_1.stream_out:pipeline_kernel_1_1.stream_in"]
    readme = (out / "README.md").read_text()
    assert "| `pipeline_kernel_1` | SLR1–SLR2 |" in readme and "a guide the placer follows" in readme
    assert json.loads((out / "design.json").read_text())["design"]["kernels"][1]["slrs"] == [1, 2]
    report = lint(out)
    assert report.ok, [str(f) for f in report.findings]
    got, want = csim(out), csim(directory)
    assert got.passed and check_pipeline_trips(out, got.output) == []
    assert (got.elements, got.max_abs_error) == (want.elements, want.max_abs_error) == (want.elements, 0.0)
