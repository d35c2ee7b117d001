"""The HLS lint, tested by breaking generated code on purpose: every kind of defect of
``hetero_dse.testing.mutants`` (a pragma removed or weakened, a loop shortened, an operator added, the
accumulation moved into the PE, a bank chosen at run time, a DDR access made conditional, a port word
narrowed...) put into real projects — float32 and int8, with and without an epilogue — one at a time, each
flagged by the check that owns it; the unmodified projects clean. ``bench/lint_mutants.py`` runs every
mutant of every site on the review's layers (YOLO-v1, ResNet-18, an int8 GEMM, a depthwise layer), which
these tests do not see."""

from __future__ import annotations

from cost_models.fpga_describe import describe
import json
import random
import shutil

import pytest

from hetero_dse.epilogue import fuse
from hetero_dse.hardware.board import load_board
from hetero_dse.hls.lint import lint
from hetero_dse.hls.project import write_project
from hetero_dse.ops import get_builtin
from hetero_dse.targets.base import Search
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget
from hetero_dse.testing.mutants import KINDS, apply, mutants

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the lint reads system headers through g++")

#: The projects mutated: (name, operator, parameters, epilogue, knobs forced, board).
PROJECTS = {
    # a PE function with an adder tree, a carried accumulation (DEPENDENCE), fp32 cores
    "gemm_f32": ("gemm", {"M": 32, "N": 32, "K": 32}, None,
                 {"tile.i": 16, "tile.j": 32, "tile.k": 32, "unroll.i": 1, "unroll.j": 8, "unroll.k": 4}, "vu9p"),
    # the same shape in int8: DSP multiplies, fabric adds
    "gemm_i8": ("gemm", {"M": 32, "N": 32, "K": 32, "dtype": "int8"}, None,
                {"tile.i": 16, "tile.j": 32, "tile.k": 32, "unroll.i": 1, "unroll.j": 8, "unroll.k": 4}, "u280"),
    # a padded convolution with a register window and an epilogue reading two operand ports
    "conv_epilogue": ("conv2d", {"C": 8, "K": 16, "H": 10, "W": 10, "kernel": 3, "padding": 1}, ["bias", "add", "relu"],
                      None, "vu9p"),
    # a linear layer whose output tile is one port word: the write pipelines no loop, its epilogue is still
    # charged and bound (a network's classifier; its BIND_OP was once left unchecked)
    "linear_one_word": ("gemm", {"M": 1, "N": 10, "K": 64}, ["bias"],
                        {"tile.i": 1, "tile.j": 10, "tile.k": 64, "unroll.i": 1, "unroll.j": 1, "unroll.k": 16},
                        "vu9p"),
    # an int8 depthwise layer with a bias and a clip on a Zynq board (128-bit ports)
    "depthwise_i8": ("depthwise_conv2d", {"C": 16, "H": 12, "W": 12, "kernel": 3, "padding": 1, "dtype": "int8"},
                     ["bias", "relu"], None, "zcu104"),
}

#: The checks that own each kind of defect: a mutant must be flagged by one of them (not only by luck).
OWNERS = {
    "unroll_partial": {"unroll"}, "partition_removed": {"partition", "banks"},
    "partition_weakened": {"partition", "banks"}, "pipeline_removed": {"pipeline"},
    "pipeline_ii": {"ii", "transfer"}, "pipeline_moved_out": {"pipeline", "trips", "transfer"},
    "trip_halved": {"trips", "transfer", "arithmetic"}, "dependence_removed": {"dependence"},
    "dependence_distance": {"dependence"}, "bind_op_impl": {"bind_op"}, "bind_op_removed": {"bind_op"},
    "bind_storage": {"storage"}, "inline": {"inline"}, "interface": {"interface"}, "dataflow_removed": {"dataflow"},
    "blocks": {"channel"}, "extra_mul": {"arithmetic"}, "extra_add": {"arithmetic"}, "sum_seeded": {"arithmetic"},
    "op_swapped": {"bind_op"}, "residual_dropped": {"arithmetic"}, "accumulate_in_pe": {"recurrence"},
    "bank_at_run_time": {"banks"}, "ddr_conditional": {"burst"}, "ddr_strided": {"burst"}, "port_width": {"ports"},
    "pipeline_style": {"pragma"}, "nest_broken": {"pipeline", "pragma"}, "interface_options": {"pragma"},
    "config_interface": {"config"},
}


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    out = tmp_path_factory.mktemp("lint_projects")
    written = {}
    for name, (op_name, params, steps, knobs, board_name) in PROJECTS.items():
        op = get_builtin(op_name).instantiate(params)
        if steps:  # per output channel: a convolution's axis 1, a matrix product's columns
            op = fuse(op, steps, tuple(range(1, len(op.output.shape) - 2)) or (len(op.output.shape) - 1,))
        board = load_board(board_name)
        e = explore(op, FpgaTarget(board), search=Search(budget=3000, top_k=1))
        op_d, analysis = e.best_operator()
        point, design = e.best_design
        if knobs is not None:
            row = e.space.encode(point.replace(**knobs))
            point, design = e.space.decode(row), describe(e.model, row)
        written[name] = write_project(out / name, op_d, analysis, point, design, board)
    return written


def test_owners_cover_every_kind():
    assert set(OWNERS) == set(KINDS)


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_the_generated_projects_are_clean(projects, name):
    report = lint(projects[name])
    assert report.ok, [str(f) for f in report.findings]
    record = json.loads((projects[name] / "design.json").read_text())
    assert record["lint"]["ok"] is True
    # every pragma of the kernel was accounted for by some check
    pragmas = sum(line.lstrip().startswith("#pragma HLS") for line in
                  (projects[name] / "src" / "kernel.cpp").read_text().splitlines())
    assert report.pragmas_checked == pragmas > 20


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_of_defect_is_flagged_by_its_check(projects, kind, tmp_path):
    """One mutant of ``kind`` a project (drawn with a fixed seed among its sites), each flagged by a check
    that owns that kind of defect."""
    rng = random.Random(kind)
    tried = 0
    for name, project in sorted(projects.items()):
        found = mutants(project, [kind])
        if not found:
            continue
        mutant = rng.choice(found)
        report = lint(apply(project, mutant, tmp_path / name))
        checks = {f.check for f in report.findings}
        assert checks & OWNERS[kind], f"{name}: {mutant} -> {[str(f) for f in report.findings] or 'no finding'}"
        tried += 1
    assert tried, f"no project has a site for {kind}"


def test_the_accumulation_moved_into_the_pe_is_its_carried_path(projects, tmp_path):
    """The review's likeliest II defect: the old sum passed into the PE (INLINE off) before the multiply."""
    (mutant,) = mutants(projects["gemm_i8"], ["accumulate_in_pe"])
    report = lint(apply(projects["gemm_i8"], mutant, tmp_path / "m"))
    (finding,) = [f for f in report.findings if f.check == "recurrence"]
    assert "passes through a call of pe" in finding.message
    # what the model charges instead: the add (one cycle for an int) and the RAM's read and write, every
    # 16 (i) x 32 / 8 (j) = 64 iterations
    record = json.loads((projects["gemm_i8"] / "design.json").read_text())["predicted"]
    assert record["recurrence"] == 1 + 2 and record["accumulation_distance"] == 16 * 4 and record["ii"] == 1


def test_a_longer_dependence_distance_names_the_codes_own(projects, tmp_path):
    record = json.loads((projects["gemm_f32"] / "design.json").read_text())["predicted"]
    distance = record["accumulation_distance"]
    mutant = next(m for m in mutants(projects["gemm_f32"], ["dependence_distance"])
                  if m.description == f"distance {distance} -> {2 * distance}")
    report = lint(apply(projects["gemm_f32"], mutant, tmp_path / "m"))
    assert any(f.check == "dependence" and f"distance={distance}" in f.message for f in report.findings)


def test_the_cores_are_the_cost_tables(projects):
    """The core each operator is bound to is the one fpga_costs charges, recorded in design.json."""
    from cost_models.fpga_costs import ARITHMETIC

    for name, dtype in (("gemm_f32", "float32"), ("gemm_i8", "int8")):
        record = json.loads((projects[name] / "design.json").read_text())
        assert record["predicted"]["cores"] == ARITHMETIC[dtype].cores()
        text = (projects[name] / "src" / "kernel.cpp").read_text()
        mul, add = ARITHMETIC[dtype].mul_core, ARITHMETIC[dtype].add_core
        assert f"op={mul[0]} impl={mul[1]}" in text and f"op={add[0]} impl={add[1]}" in text


def test_lint_command(projects, cli, tmp_path):
    result = cli("lint", projects["gemm_f32"], projects["conv_epilogue"])
    assert result.code == 0 and result.out.count("PASS") == 2
    (mutant,) = [m for m in mutants(projects["gemm_f32"], ["dataflow_removed"])]
    broken = apply(projects["gemm_f32"], mutant, tmp_path / "broken")
    result = cli("lint", "--json", projects["gemm_f32"], broken)
    assert result.code == 1
    verdicts = json.loads(result.out)
    assert [v["ok"] for v in verdicts] == [True, False]
    assert any("[dataflow]" in f for f in verdicts[1]["findings"])
    result = cli("lint", tmp_path / "broken" / "src")
    assert result.code == 1 and "no HLS project" in result.err
