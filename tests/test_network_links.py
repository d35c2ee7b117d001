"""The lint reads a network project's connectivity.cfg (``network_lint_links``): every m_axi port of every compute
unit on the bank the model places it, within the board's banks and holding what the host allocates there, and the
XRT test double's banks the file's. Each check is shown to fail on a defect put into the file on purpose."""

from __future__ import annotations

import json

import numpy as np
import pytest
from small_net import small_design

import hetero_dse.hls.network_lint_links as links
from hetero_dse.hardware.board import RESOURCE_KINDS
from hetero_dse.hls.cparse import parse_kernel
from hetero_dse.hls.network_lint import lint_network
from hetero_dse.hls.network_project import write_network_project


@pytest.fixture(scope="module")
def units_project(tmp_path_factory):
    """The small int8 network on vu9p, three compute units of two weight ports each: (the project, the top's
    arguments, its m_axi ports)."""
    from cost_models.fpga_network_units import slr_placement

    _, design, run, _, _ = small_design("int8", board="vu9p", weight_ports=(2,))
    unit = np.array([design.resources[k] for k in RESOURCE_KINDS])
    design.compute_units, design.unit_slrs = 3, slr_placement(design.board, unit, 3)
    design.resources = {k: 3 * v for k, v in design.resources.items()}
    assert design.unit_slrs == (0, 1, 2)
    project = write_network_project(tmp_path_factory.mktemp("links") / "units", design, run)
    k = parse_kernel(project / "src" / "kernel.cpp", project / "sim" / "include")
    m_axi = {p.get("port") for p in k.pragmas if p.name == "INTERFACE" and p.get("mode") == "m_axi"}
    return project, list(k.functions["network_kernel"].params), m_axi


def _findings(project, arguments, m_axi):
    found = []
    record = json.loads((project / "design.json").read_text())
    links.check_links(project, record, arguments, m_axi, lambda check, where, message: found.append(message))
    return found


def test_the_lint_passes_the_connectivity_the_project_writes(units_project):
    project, arguments, m_axi = units_project
    assert arguments[:3] == ["table", "first", "count"] and m_axi == {"table", "act_in", "act_res", "act_out", "wgt",
                                                                      "wgt1", "params"}
    assert _findings(project, arguments, m_axi) == []
    cfg = project / "connectivity.cfg"
    good = cfg.read_text()
    try:  # and the whole lint says so where the file is wrong
        cfg.write_text(good.replace("sp=network_kernel_2.wgt1:DDR[1]\n", ""))
        report = lint_network(project)
        assert not report.ok and any(f.check == "links" and "network_kernel_2.wgt1" in f.message
                                     for f in report.findings)
    finally:
        cfg.write_text(good)


@pytest.mark.parametrize("old, new, says", [
    ("sp=network_kernel_2.wgt1:DDR[1]\n", "", "no sp line for network_kernel_2.wgt1"),
    ("network_kernel_1.wgt1:DDR[2]", "network_kernel_1.wgt1:DDR[3]",
     "network_kernel_1.wgt1 on [3]: the model places it on [2]"),
    ("network_kernel_3.act_out:DDR[3]", "network_kernel_3.act_out:DDR[1]",
     "network_kernel_3.act_out on [1]: the model places it on [3]"),
    ("network_kernel_1.table:DDR[0]", "network_kernel_1.table:DDR[4]", "vu9p has 4 DDR banks, 0 to 3"),
    ("network_kernel_1.params:DDR[1]", "network_kernel_1.params:HBM[1]", "vu9p has 4 DDR banks"),
    ("network_kernel_1.params:DDR[1]", "network_kernel_1.params:DDR[1]\nsp=network_kernel_1.params:DDR[1]",
     "network_kernel_1.params is connected twice"),
    ("network_kernel_1.params:DDR[1]", "network_kernel_1.params:DDR[1]\nsp=network_kernel_1.wgt2:DDR[1]",
     "wgt2 is not one of the kernel's m_axi ports"),
    ("nk=network_kernel:3:", "nk=network_kernel:2:", "the design has 3 compute unit(s) of network_kernel"),
    ("network_kernel_3.act_in:DDR[3]", "network_kernel_4.act_in:DDR[3]", "network_kernel_4 is not one of the compute"),
    ("network_kernel_1.wgt:DDR[1]", "network_kernel_1.wgt:DDR[1:2]", "the weight ports span [1, 2] banks"),
    # each unit kept to the SLR the model places it in
    ("slr=network_kernel_2:SLR1\n", "", "network_kernel_2 has no slr line: the model keeps it to SLR1"),
    ("slr=network_kernel_2:SLR1", "slr=network_kernel_2:SLR0", "network_kernel_2 on SLR0: the model keeps it to SLR1"),
    ("slr=network_kernel_3:SLR2", "slr=network_kernel_3:SLR3", "slr=network_kernel_3:SLR3: not one of the compute"),
    # v++'s config file: its lines in their section
    ("[connectivity]\n", "", "nk=network_kernel:3:network_kernel_1.network_kernel_2.network_kernel_3: outside the "
                             "[connectivity] section"),
    ("sp=network_kernel_1.params:DDR[1]", "sp network_kernel_1.params DDR[1]", "not a [section] or KEY=VALUE line"),
])
def test_each_connectivity_defect_is_a_finding(units_project, old, new, says):
    project, arguments, m_axi = units_project
    cfg = project / "connectivity.cfg"
    good = cfg.read_text()
    assert old in good
    try:
        cfg.write_text(good.replace(old, new))
        assert any(says in f for f in _findings(project, arguments, m_axi)), _findings(project, arguments, m_axi)
    finally:
        cfg.write_text(good)


def test_space_around_the_equals_sign_is_what_v_plus_plus_reads_too(units_project):
    project, arguments, m_axi = units_project
    cfg = project / "connectivity.cfg"
    good = cfg.read_text()
    try:
        cfg.write_text(good.replace("sp=", "sp = ").replace("slr=", "slr =").replace("nk=", "nk= "))
        assert _findings(project, arguments, m_axi) == []
    finally:
        cfg.write_text(good)


def test_the_xrt_double_must_check_the_hosts_buffers_against_the_files_banks(units_project):
    """xrt_banks.h, which the host's test run checks each buffer's bank against, is connectivity.cfg's."""
    project, arguments, m_axi = units_project
    banks = project / "sim" / "include" / "xrt" / "xrt_banks.h"
    good = banks.read_text()
    row = "{3, -1, -1, 3, 3, 3, 0, 1, 0},  // network_kernel_2"
    assert row in good
    try:
        banks.write_text(good.replace(row, "{3, -1, -1, 3, 3, 3, 0, 2, 0},  // network_kernel_2"))
        assert any("network_kernel_2's banks [3, -1, -1, 3, 3, 3, 0, 2, 0]: connectivity.cfg's are "
                   "[3, -1, -1, 3, 3, 3, 0, 1, 0]" in f for f in _findings(project, arguments, m_axi))
    finally:
        banks.write_text(good)


def test_a_bank_past_its_capacity_is_a_finding(units_project, monkeypatch):
    """The host's buffers on each bank (their sizes from data/, each unit's own) against the bank's capacity: banks
    of 2 KB here, which the small network's arena alone is past."""
    project, arguments, m_axi = units_project
    arena = (project / "data" / "arena.bin").stat().st_size
    table = (project / "data" / "table.bin").stat().st_size
    monkeypatch.setattr(links, "bank_bytes", lambda memory: 2048)
    assert arena + table > 2048
    found = _findings(project, arguments, m_axi)
    assert any(f.startswith("bank 0 holds ") and f.endswith("it has 0.0 MB") for f in found), found


def test_an_slr_given_more_units_than_it_holds_is_a_finding(units_project, monkeypatch):
    """The units' resources (the design's over its units) against each SLR's room: rooms of a unit and a half's
    here, and two units put on one on purpose."""
    project, arguments, m_axi = units_project
    cfg = project / "connectivity.cfg"
    good = cfg.read_text()
    unit = np.array([json.loads((project / "design.json").read_text())["design"]["resources"][k]
                     for k in RESOURCE_KINDS]) / 3
    monkeypatch.setattr(links, "slr_room", lambda board: np.array([1.5 * unit] * 3))
    try:
        assert _findings(project, arguments, m_axi) == []
        cfg.write_text(good.replace("slr=network_kernel_3:SLR2", "slr=network_kernel_3:SLR0"))
        found = _findings(project, arguments, m_axi)
        assert any(f.startswith("SLR0 is given 2 compute unit(s): their dsp, bram18k, lut, ff are past its room")
                   for f in found), found
    finally:
        cfg.write_text(good)


def test_a_zynq_project_has_no_link_configuration(tmp_path):
    _, design, run, _, _ = small_design("int8", board="zcu102", weight_ports=(1,))
    project = write_network_project(tmp_path / "zynq", design, run)
    assert not (project / "connectivity.cfg").exists() and lint_network(project).ok
    (project / "connectivity.cfg").write_text("[connectivity]\nnk=network_kernel:1:network_kernel_1\n")
    report = lint_network(project)
    assert any("zcu102 has no acceleration platform" in f.message for f in report.findings)


def test_a_lone_kernel_that_fits_an_slr_is_kept_to_one(tmp_path):
    """The model clocks a kernel within one SLR as crossing none: the project keeps it to the first SLR whose room
    (70 % of what u200's shell leaves: 1,585.5, 921.9 and 1,585.5 DSPs) holds it (``lone_slr``), and the lint
    holds the line to it."""
    from cost_models.fpga_slrs import lone_slr
    from hetero_dse.hardware.board import load_board

    u200 = load_board("u200")
    assert lone_slr(u200, [1500, 0, 0, 0, 0]) == 0 and lone_slr(u200, [1600, 0, 0, 0, 0]) is None
    assert lone_slr(u200, [900, 0, 0, 0, 0]) == 0 and lone_slr(u200, [1000, 0, 0, 250_000, 0]) is None  # 248,283
    assert lone_slr(load_board("zcu102"), [10, 0, 0, 0, 0]) is None
    _, design, run, _, _ = small_design("int8", board="vu9p", weight_ports=(1,))
    project = write_network_project(tmp_path / "lone", design, run)
    cfg = project / "connectivity.cfg"
    assert "slr=network_kernel_1:SLR0" in cfg.read_text() and lint_network(project).ok
    assert json.loads((project / "design.json").read_text())["design"]["unit_slrs"] == [0]
    cfg.write_text(cfg.read_text().replace("slr=network_kernel_1:SLR0\n", ""))
    report = lint_network(project)
    assert any("network_kernel_1 has no slr line: the model keeps it to SLR0" in f.message for f in report.findings)
