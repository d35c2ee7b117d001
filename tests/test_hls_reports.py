"""Readers of what Vitis HLS reports, on files modelled on each tool family's format (tests/data/hls_reports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetero_dse.hls.reports import ReportError, read_csynth, read_solution
from hetero_dse.hls.tool_reports import read_bind_tables, read_cosim, read_impl, read_log

DATA = Path(__file__).parent / "data" / "hls_reports"


def test_vivado_2018_report_with_dsp48e_and_nested_loops():
    r = read_csynth(DATA / "vivado_2018" / "kernel_csynth.xml")
    assert (r.tool_version, r.part, r.top) == ("2018.3", "xcvu9p-flgb2104-2-i", "gemm_kernel")
    assert (r.target_clock_ns, r.clock_uncertainty_ns, r.estimated_clock_ns) == (4.0, 0.5, 3.456)
    assert r.latency_cycles == {"best": 4391, "worst": 4391} and r.interval_cycles == {"min": 4392, "max": 4392}
    # <DSP48E> is this version's name for the DSP count
    assert r.resources == {"dsp": 320, "bram18k": 8, "uram": 0, "lut": 41000, "ff": 38000}
    assert r.available["dsp"] == 6840 and r.available["uram"] == 960
    (outer,) = r.loops
    assert (outer.name, outer.trip_count, outer.ii, outer.depth, outer.latency_cycles) == ("tile_i", 4, None, None,
                                                                                          4388)
    (inner,) = outer.children
    assert (inner.name, inner.trip_count, inner.ii, inner.depth, inner.latency_cycles) == ("pe_k", 256, 1, 23, 278)
    assert r.latency_seconds == pytest.approx(4391 * 3.456e-9)
    assert not r.missing


def test_vitis_2020_solution_with_undef_ranges_modules_and_port_widths():
    r = read_solution(DATA / "vitis_2020")  # a project directory: the solution's report is found
    assert (r.tool_version, r.top, r.target_clock_ns) == ("2020.2", "conv2d_kernel", 3.33)
    # a dataflow top whose latency depends on data: undef, not a number and not a crash
    assert r.latency_cycles == {"best": None, "worst": None} and r.interval_cycles == {"min": None, "max": None}
    assert r.latency_seconds is None
    assert r.resources["dsp"] == 8420 and r.available["dsp"] == 9024
    assert r.port_bits == {"gmem0": 512, "gmem1": 32}
    assert set(r.modules) == {"compute_tile", "read_buf0_pad"}
    (pe,) = r.modules["compute_tile"].loops
    assert (pe.name, pe.trip_count, pe.ii, pe.depth) == ("pe_rc_pe_rx_pe_ry_pe_i", 1792, 4, 19)
    (tile,) = r.modules["read_buf0_pad"].loops
    # a trip count given as a range: its maximum; an undef latency: None
    assert (tile.trip_count, tile.latency_cycles) == (8, None)
    assert [c.name for c in tile.children] == ["box_d1_box_d2"] and tile.children[0].ii == 1
    read = r.modules["read_buf0_pad"]
    assert read.latency_cycles == {"best": 12, "worst": None} and read.resources["uram"] is None
    assert "resources.uram" in read.missing
    loops = {lp.name: module for module, lp in r.all_loops()}
    assert loops["box_d1_box_d2"] == "read_buf0_pad"


def test_vitis_2023_report_with_module_information_names_and_ranges():
    r = read_solution(DATA / "vitis_2023" / "solution1")
    assert (r.tool_version, r.part, r.estimated_clock_ns) == ("2023.2", "xcvu9p-flgb2104-2-i", 2.92)
    assert r.latency_cycles == {"best": 1039408, "worst": 1040000}
    assert r.interval_cycles == {"min": 1039409, "max": 1040001}
    assert set(r.modules) == {"compute_tile", "read_buf1_W"}
    (pe,) = r.modules["compute_tile"].loops
    assert (pe.name, pe.trip_count, pe.ii, pe.depth, pe.latency_cycles) == ("pe_rc_pe_rx_pe_ry_pe_i", 2016, 1, 14,
                                                                            2028)
    w = r.modules["read_buf1_W"]
    assert w.latency_cycles == {"best": 10, "worst": 295010}  # "a ~ b": best is the least, worst the most
    (tiles,) = w.loops
    assert tiles.latency_cycles == 295000 and tiles.children[0].ii == 4 and tiles.children[0].trip_count == 144
    doc = r.to_json()
    assert set(doc) >= {"tool_version", "part", "top", "target_clock_ns", "estimated_clock_ns", "latency_cycles",
                        "interval_cycles", "resources", "available", "loops"}


def test_a_report_cut_short_or_not_a_report_is_one_sentence(tmp_path):
    with pytest.raises(ReportError, match="not a complete XML report"):
        read_csynth(DATA / "truncated_csynth.xml")
    other = tmp_path / "other.xml"
    other.write_text("<project><files/></project>")
    with pytest.raises(ReportError, match="not a synthesis report"):
        read_csynth(other)
    with pytest.raises(ReportError, match="no csynth.xml"):
        read_solution(tmp_path)
    with pytest.raises(ReportError, match="does not exist"):
        read_solution(tmp_path / "nowhere")


def test_a_solution_whose_module_report_is_cut_short_still_reads(tmp_path):
    import shutil

    shutil.copytree(DATA / "vitis_2020", tmp_path / "p")
    report_dir = tmp_path / "p" / "solution1" / "syn" / "report"
    (report_dir / "read_buf0_pad_csynth.xml").write_text("<profile><Perf")
    r = read_solution(tmp_path / "p")
    assert set(r.modules) == {"compute_tile"}


def test_bind_tables_log_cosim_and_implementation():
    solution = DATA / "vitis_2023" / "solution1"
    tables = read_bind_tables(solution / "syn" / "report" / "csynth.rpt")
    ops = [row for row in tables["ops"] if row.get("Op")]
    assert [(row["Variable"], row["Op"], row["Impl"], row["DSP"]) for row in ops] == [
        ("pe_m", "fmul", "maxdsp", "3"), ("pe_acc", "fadd", "fulldsp", "2")]
    (storage,) = [row for row in tables["storage"] if row.get("Variable")]
    assert (storage["Variable"], storage["Impl"], storage["BRAM"]) == ("buf1_W_s", "bram", "64")
    assert storage["Bitwidth, Depth, Banks"] == "32, 36, 64"

    log = read_log(solution / "solution1.log")
    assert log.pipelines == [
        {"loop": "pe_rc_pe_rx_pe_ry_pe_i", "target_ii": 1, "final_ii": 4, "depth": 19},
        {"loop": "box_d1_box_d2_box_d3", "target_ii": 4, "final_ii": 4, "depth": 5}]
    assert log.port_limits == [{"module": "compute_tile", "loop": "pe_rc_pe_rx_pe_ry_pe_i", "array": "buf0_pad"}]
    assert log.bursts == [{"length": 64, "bits": 512, "loop": "box_d1", "bundle": "gmem1"},
                          {"length": None, "bits": 512, "loop": "box_d2", "bundle": "gmem0"}]
    assert len(log.errors) == 1

    cosim = read_cosim(solution / "sim" / "report" / "conv2d_kernel_cosim.rpt")
    assert cosim.status == "Pass" and cosim.latency_cycles == {"min": 1041200, "avg": 1041200, "max": 1041200}
    assert cosim.interval_cycles["min"] is None

    impl = read_impl(solution / "impl" / "report" / "verilog" / "export_impl.rpt")
    assert impl.resources == {"dsp": 4480, "bram18k": 2951, "uram": 0, "lut": 541200, "ff": 622013}
    assert (impl.target_clock_ns, impl.achieved_clock_ns, impl.timing_met) == (4.0, 4.31, False)
    assert impl.fmax_mhz == pytest.approx(1000 / 4.31)


def test_rtl_port_widths_cores_and_memories_through_the_hierarchy():
    from hetero_dse.hls.rtl import read_rtl

    rtl = read_rtl(DATA / "vitis_2023" / "solution1" / "syn" / "verilog")
    assert rtl.top == "conv2d_kernel"
    # the definitive widening check: gmem1 moves 32-bit words, whatever the model assumed
    assert rtl.port_bits == {"gmem0": 512, "gmem1": 32, "gmem2": 512}
    # 3 PEs of 2 fmul + 1 fadd each, and one integer multiplier in compute_tile itself
    assert rtl.cores == {"fmul": 6, "fadd": 3, "mul": 1}
    assert rtl.memories == {"conv2d_kernel_buf0_pad_s_RAM_2P_BRAM_1R1W": 2}


def test_rtl_that_is_missing_or_broken_is_one_sentence(tmp_path):
    from hetero_dse.hls.rtl import RtlError, read_rtl

    with pytest.raises(RtlError, match="no Verilog"):
        read_rtl(tmp_path)
    (tmp_path / "bad.v").write_text("module broken (a; endmodule")
    with pytest.raises(RtlError, match="does not parse"):
        read_rtl(tmp_path)


def test_synth_report_prints_tables_and_json(cli):
    import json

    r = cli("synth", "report", str(DATA / "vitis_2020"))
    assert r.code == 0, r.err
    assert "pe_rc_pe_rx_pe_ry_pe_i" in r.out and "gmem1 32 bits" in r.out and "93.3 %" in r.out
    r = cli("synth", "report", str(DATA / "vitis_2023" / "solution1" / "syn" / "report" / "csynth.xml"), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["latency_cycles"] == {"best": 1039408, "worst": 1040000} and doc["resources"]["dsp"] == 4480
    assert doc["resources"]["uram"] == 0 and doc["available"]["bram18k"] == 4320
    r = cli("synth", "report", str(DATA / "truncated_csynth.xml"))
    assert r.code == 1 and "not a complete XML report" in r.err and "Traceback" not in r.err


def test_vitis_2022_pipeline_modules_are_read_and_only_the_designs():
    """Vitis 2022 and later move each pipelined loop that is not its function's whole body into a module
    <function>_Pipeline_<labels> (its name cut at 80 characters); the top's RTLDesignHierarchy names the
    design's modules, so a report another design left in the folder is not read as one of them."""
    r = read_solution(DATA / "vitis_2022_pipeline")
    assert (r.tool, r.tool_version, r.top) == ("Vitis HLS", "2022.2", "gemm_kernel")
    assert set(r.modules) == {"read_buf0_A", "read_buf0_A_Pipeline_box_d0_box_d1_word", "compute_tile",
                              "write_out_Pipeline_box_d0_box_d1_word_box_d1_word_group_a_very_long_nest_of_lab"}
    assert "conv2d_kernel_compute_tile" not in r.modules and r.hierarchy and "compute" in r.hierarchy
    (word,) = r.modules["read_buf0_A_Pipeline_box_d0_box_d1_word"].loops
    # the loop element is named after the flattened nest's labels, without a <Name> child; its II is achieved
    assert (word.name, word.trip_count, word.ii, word.depth) == ("box_d0_box_d1_word", 64, 2, 70)
    # one module's own report, given as the file, is read alone
    alone = read_solution(DATA / "vitis_2022_pipeline" / "solution1" / "syn" / "report" / "compute_tile_csynth.xml")
    assert alone.top == "compute_tile" and alone.modules == {}
    assert read_csynth(DATA / "vivado_2018" / "kernel_csynth.xml").tool == "Vivado HLS"


def _record(loops, instances, resources=None):
    """A design record with the figures validation reads."""
    return {"signature": "gemm", "knobs": {"clock_mhz": 250.0},
            "predicted": {"latency_s": 5251 / 250e6, "resources": resources or {"dsp": 128}},
            "expectations": {"loops": loops, "instances": instances, "buffers": [], "port_bits": {}}}


def test_validation_finds_loops_in_pipeline_modules_and_strict_fails_an_ii_violation():
    from hetero_dse.hls.validate import validate, worst_error

    loops = [{"process": "read_buf0_A", "labels": ["box_d0", "box_d1_word"], "trip_count": 64, "ii": 1},
             {"process": "compute_tile", "labels": ["pe_k", "pe_i"], "trip_count": 128, "ii": 1},
             {"process": "write_out", "trip_count": 32, "ii": 1,
              "labels": ["box_d0", "box_d1_word", "box_d1_word_group_a_very_long_nest_of_labels"]}]
    result = {"status": "ok", "report": read_solution(DATA / "vitis_2022_pipeline").to_json()}
    check = validate(_record(loops, {}), result)
    rows = {row["figure"]: row for row in check["figures"]}
    # the read's loop is in its _Pipeline_ module, at II 2 where the model said 1: a mismatch --strict fails
    read = rows["read_buf0_A:box_d0/box_d1_word II"]
    assert (read["predicted"], read["reported"]) == (1, 2) and read in worst_error(check, 0.25)
    # the compute's loop stays in its function (the loop is its whole body), the write's is in a module whose
    # name Vitis cut short: both found, both as predicted
    assert rows["compute II"]["error"] == 0 and rows["compute_tile:pe_k/pe_i trip count"]["error"] == 0
    assert rows["write_out:box_d0/box_d1_word/box_d1_word_group_a_very_long_nest_of_labels II"]["error"] == 0
    # a loop that is in no module at all is a failure, not a silent pass
    missing = validate(_record([{"process": "read_buf9_X", "labels": ["box_d0"], "trip_count": 4, "ii": 1}], {}),
                       result)
    row = next(r for r in missing["figures"] if r["figure"].endswith(" II"))
    assert row["reported"] is None and row["missing"] and worst_error(missing, 0.25) == [row, next(
        r for r in missing["figures"] if r["figure"].endswith("trip count"))]


def test_operator_cores_are_what_the_rtl_instantiates():
    """An integer add in fabric is logic, never a core module: not expected among the cores; the epilogue's
    operators are (its lanes times its adds and multiplies)."""
    from hetero_dse.hls.project import _core_instances

    int8 = {"units": {"mul": 4096, "add": 4096}, "cores": {"mul": {"op": "mul", "impl": "dsp"},
                                                           "add": {"op": "add", "impl": "fabric"}}}
    assert _core_instances(int8) == {"mul": 4096}
    fp = {"units": {"mul": 896, "add": 896}, "cores": {"mul": {"op": "fmul", "impl": "fulldsp"},
                                                       "add": {"op": "fadd", "impl": "fulldsp"}},
          "epilogue": {"steps": ["bias", "add", "relu"], "lanes": 7, "adds": 2, "muls": 0}}
    assert _core_instances(fp) == {"fmul": 896, "fadd": 896 + 7 * 2}
