"""HLS projects: generated from the best (and from many-tile) designs, C-simulated with g++ against the reference.

Each C-simulation compares every output element with the operator's numpy/torch reference (integers
exactly, floats within a tolerance growing with the reduction length) and fails on any mismatch.
"""

from __future__ import annotations

from cost_models.fpga_describe import describe
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from hetero_dse.hardware.board import load_board
from hetero_dse.targets.base import Search
from hetero_dse.targets.flow import explore
from hetero_dse.targets.fpga import FpgaTarget
from hetero_dse.hls.csim import csim
from hetero_dse.hls.lint import LintError, lint
from hetero_dse.hls.project import write_project
from hetero_dse.ops import BUILTIN, get_builtin

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++ (scripts/bootstrap.sh)")

VU9P = load_board("vu9p")


def build(op, tmp_path, budget=4000, knobs=None):
    e = explore(op, FpgaTarget(VU9P), search=Search(budget=budget, top_k=1))
    op_d, analysis = e.best_operator()
    point, design = e.best_design
    if knobs is not None:
        row = e.space.encode(point.replace(**knobs))
        point, design = e.space.decode(row), describe(e.model, row)
    project = write_project(tmp_path / e.label / "hls", op_d, analysis, point, design, VU9P)
    return project, point, design


def assert_passes(project):
    """C-simulation passes (poison-filled blocks, strict locks), g++ -Wall -Wextra has nothing to say about
    the generated code, and the HLS lint finds the code and design.json in agreement."""
    result = csim(project)
    assert result.passed, result.output
    assert result.mismatches == 0 and result.elements > 0
    assert not result.warnings, result.warnings
    report = lint(project)
    assert report.ok, [str(f) for f in report.findings]
    record = json.loads((project / "design.json").read_text())
    assert record["lint"]["ok"] is True
    units = record["predicted"]["units"]
    assert (report.mul_per_iteration, report.add_per_iteration) == (units["mul"], units["add"])
    return result


@pytest.mark.parametrize("dtype", ["float32", "int16", "int8"])
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_best_design_of_every_builtin_passes_csim(name, dtype, tmp_path):
    op = get_builtin(name).instantiate({"dtype": dtype}, shape="small:s2")
    project, point, design = build(op, tmp_path)
    result = assert_passes(project)
    if dtype.startswith("int"):
        assert result.max_abs_error == 0.0
    # A carried sum declares the distance that meets its II over the whole read-modify-write path.
    kernel = (project / "src" / "kernel.cpp").read_text()
    compute = kernel[kernel.index("static void compute_tile"):]
    if "DEPENDENCE" in compute:
        distance = int(re.search(r"distance=(\d+)", compute).group(1))
        assert distance == design["accumulation_distance"] and distance * design["ii"] >= design["recurrence"]


def yolo_reduced(layer: str, dtype: str):
    """A YOLO-v1 layer with its kernel, stride, padding and image size, channels divided by 8 (C1 keeps 3 in)."""
    params = dict(get_builtin("conv2d").shapes(f"yolo:{layer}")[0][1])
    params["C"] = max(3, params["C"] // 8) if params["C"] > 3 else params["C"]
    params["K"] = params["K"] // 8
    if layer == "C1":
        params["H"] = params["W"] = 112
    params["dtype"] = dtype
    return get_builtin("conv2d").instantiate(params)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("layer", ["C1", "C8", "C15"])
def test_yolo_layers_pass_csim(layer, dtype, tmp_path):
    project, _, design = build(yolo_reduced(layer, dtype), tmp_path)
    assert design["feasible"]
    assert_passes(project)
    # the weights are laid out as the model chose: moved by the host (another dimension innermost) where
    # that reads faster, and C-simulated in that layout
    (w,) = [b for b in design["buffers"] if b["tensor"] == "W"]
    layout = json.loads((project / "design.json").read_text())["expectations"]["layout"]
    transposed = [port for port in layout.values() if port["tensor"] == "W" and port["prepared_on_host"]]
    assert bool(transposed) == (w["layout"] != sorted(w["layout"]))
    if dtype == "float32" and layer == "C15":
        assert w["layout"][-1] != 3  # 3x3 rows of 3 floats are the slowest way to read these weights


@pytest.mark.parametrize("layer,knobs,window,sets,pad_layout", [
    # C12: the padded input slides along the unrolled j (its columns read whole into registers, each
    # lane picking its own); W's 64 k banks span four words, which land in four rotating sets of banks
    ("C12", {"tile.k": 64, "tile.rc": 8, "tile.i": 14, "tile.j": 14, "unroll.k": 64, "unroll.j": 14}, 3, 4,
     [0, 1, 2, 3]),
    # C4: the window slides down the rows under the unrolled i, and the host moves the image's rows
    # innermost so that a word of rows fills the window's banks (the padding is still filled on chip)
    ("C4", {"tile.k": 32, "tile.i": 7, "tile.j": 56, "tile.rc": 4, "unroll.k": 32, "unroll.i": 7,
            "order": ("b", "k", "j", "i")}, 2, 2, [0, 1, 3, 2]),
])
def test_register_windows_and_sets_of_banks_pass_csim(layer, knobs, window, sets, pad_layout, tmp_path):
    """YOLO layers (channels / 8) whose sliding input is read through a register window and whose weights'
    banks span several words (a word an iteration, into one of several sets of banks); C-simulation and the
    lint agree with the model on both."""
    knobs = {"unroll.i": 1, "unroll.j": 1, "unroll.rc": 1, "unroll.rx": 1, "unroll.ry": 1, **knobs}
    project, _, design = build(yolo_reduced(layer, "float32"), tmp_path, knobs=knobs)
    pad, w, _ = design["buffers"]
    assert pad["window"] == [window] and pad["partition"][window] == pad["shape"][window]
    assert pad["layout"] == pad_layout
    assert (w["bank_sets"], w["word_ii"], w["runtime_banks"]) == (sets, 1, sets)
    assert_passes(project)
    kernel = (project / "src" / "kernel.cpp").read_text()
    assert "window_buf0_pad:" in kernel and "box_d0_set:" in kernel
    # each set of W's banks is its own unrolled copy, its bank named at compile time
    assert re.search(rf"buf\[\(hdse_j / {sets}\) \* {16 * sets} \+ hdse_t \* 16 \+ x0i\]", kernel)
    # one PE is a function Vitis schedules once and instantiates per lane
    pe = kernel[kernel.index("static acc_t pe("):kernel.index("static void compute_tile")]
    assert "#pragma HLS INLINE off" in pe and kernel.count("= pe(") == 1


@pytest.mark.parametrize("dtype,steps", [("float32", ["bias", "relu"]), ("int8", ["bias"]), ("float32", None)])
def test_an_output_written_channels_innermost_passes_csim(dtype, steps, tmp_path):
    """A depthwise layer on a Zynq board writes its output with the channels innermost (a word's lanes from
    as many channel banks, the host moving them back after the run), its epilogue's operands laid out alike;
    partial tiles along i and j land in the padded layout, every write unconditional."""
    from hetero_dse.epilogue import fuse

    op = get_builtin("depthwise_conv2d").instantiate({"C": 16, "H": 13, "W": 13, "kernel": 3, "padding": 1,
                                                      "dtype": dtype})
    if steps:
        op = fuse(op, steps, (1,))
    board = load_board("zcu104")
    e = explore(op, FpgaTarget(board), search=Search(budget=3000, top_k=1))
    op_d, analysis = e.best_operator()
    row = e.space.encode(e.best_design[0].replace(**{"tile.c": 16, "tile.i": 8, "tile.j": 8, "unroll.c": 16,
                                                     "unroll.i": 1, "unroll.j": 1}))
    design = describe(e.model, row)
    project = write_project(tmp_path / "hls", op_d, analysis, e.space.decode(row), design, board)
    out = design["buffers"][-1]
    assert out["layout"] == [0, 2, 3, 1] and out["extents"] == [1, 16, 16, 16]
    layout = json.loads((project / "design.json").read_text())["expectations"]["layout"]
    assert [name for name, port in layout.items() if port["tensor"] == "O"] == ["O_t0231"]
    assert_passes(project)


# The innermost output tile is whole or a multiple of a port word (16 floats), so a tile writes whole words
# of its own; every other loop is split.
@pytest.mark.parametrize("name,knobs", [
    # partial last tiles on a prime extent (13 = 8 + 5), reduce tiles with a remainder (11 = 4 + 4 + 3)
    ("gemm", {"tile.i": 8, "tile.k": 4, "unroll.i": 1, "unroll.k": 4, "tile.j": 7, "unroll.j": 1}),
    # every spatial loop tiled, weights reloaded per output-channel tile, stride 2 with padding
    ("conv2d", {"tile.k": 4, "tile.i": 4, "tile.j": 7, "tile.rc": 1, "unroll.k": 2, "unroll.i": 1, "unroll.j": 1,
                "unroll.rc": 1, "unroll.rx": 1, "unroll.ry": 1}),
    # expansion + padding producers inlined in the read stage, tiles across the expanded image
    ("conv_transpose2d", {"tile.i": 5, "tile.j": 25, "tile.k": 4, "unroll.i": 1, "unroll.j": 1, "unroll.k": 4,
                          "unroll.rc": 1, "unroll.rx": 1, "unroll.ry": 1, "tile.rc": 1}),
    # the circulant producer of BCM and a split reduction over blocks
    ("bcm", {"tile.q": 1, "tile.i": 7, "tile.p": 1, "unroll.q": 1, "unroll.i": 1, "unroll.p": 1, "tile.j": 7,
             "unroll.j": 1}),
])
def test_many_tile_designs_pass_csim(name, knobs, tmp_path):
    op = get_builtin(name).instantiate(shape="small:s2")
    project, point, design = build(op, tmp_path, knobs=knobs)
    assert design["tiles"] > 1
    assert_passes(project)


def test_a_wrong_result_fails(tmp_path):
    op = get_builtin("gemm").instantiate(shape="small:s1")
    project, _, _ = build(op, tmp_path)
    ref = project / "data" / "O.reference.bin"
    values = np.fromfile(ref, dtype=np.float32)
    values[5] += 1.0
    values.tofile(ref)
    result = csim(project)
    assert not result.passed and result.mismatches == 1 and result.max_abs_error == pytest.approx(1.0, rel=1e-3)


def test_design_json_holds_knobs_and_predictions(tmp_path):
    import json

    op = get_builtin("conv2d").instantiate(shape="small:s1")
    project, point, design = build(op, tmp_path)
    record = json.loads((project / "design.json").read_text())
    assert record["knobs"] == point.to_json() and record["predicted"]["latency_s"] == design["latency_s"]
    readme = (project / "README.md").read_text()
    assert f"{design['pe']} lanes" in readme and "vitis_hls -f run_hls.tcl" in readme
    tcl = (project / "project.tcl").read_text()
    assert "set part xcvu9p-flgb2104-2-i" in tcl and "set clock_period_ns 4.0" in tcl
    cfg = (project / "connectivity.cfg").read_text()
    ports = list(record["expectations"]["layout"])  # I (or its transposed copy), W, O: one DDR channel each
    assert [record["expectations"]["layout"][p]["tensor"] for p in ports] == ["I", "W", "O"]
    assert all(f"sp=conv2d_kernel_1.{p}:DDR[{i}]" in cfg for i, p in enumerate(ports))


def test_custom_operator_without_reference_uses_tvm_and_passes(cli, write, tmp_path):
    """A user's op.py with no library reference: the testbench compares with TVM's llvm build."""
    import json

    path = write("op.py", """
        import hetero_dse
        from tvm import te

        @hetero_dse.operator(N=12, M=10)
        def sym(N, M):
            A = te.placeholder((N, M), name="A")
            s = te.placeholder((M,), name="s")
            k = te.reduce_axis((0, M), name="k")
            return [A, s, te.compute((N, N), lambda i, j: te.sum(A[i, k] * s[k] * A[j, k], axis=k), name="G")]
        """)
    out = tmp_path / "o"
    r = cli("explore", path, "--board", "zcu104", "--out", out, "--csim")
    assert r.code == 0, r.err
    (e,) = json.loads((out / "report.json").read_text())["explorations"]
    assert e["csim"]["passed"] and e["csim"]["elements"] == 144
    assert "TVM's unscheduled llvm build" in (out / e["project"] / "tb" / "tb.cpp").read_text()


# ----------------------------------------------------------------------------------- the lint catches
def _broken(tmp_path, name, params, knobs, old, new, where="static void compute_tile"):
    """A project whose kernel.cpp was emitted by a template broken the way ``old`` -> ``new`` says, from
    ``where`` on (the PE array and the function of one PE are where these breakages matter)."""
    op = get_builtin(name).instantiate(params)
    project, _, _ = build(op, tmp_path, knobs=knobs)
    assert lint(project).ok
    kernel = project / "src" / "kernel.cpp"
    text = kernel.read_text()
    at = text.index(where)
    assert old in text[at:]
    kernel.write_text(text[:at] + text[at:].replace(old, new, 1))
    return lint(project)


GEMM = {"M": 16, "N": 16, "K": 16}
GEMM_KNOBS = {"tile.i": 16, "tile.j": 16, "tile.k": 16, "unroll.i": 1, "unroll.j": 4, "unroll.k": 4}


def test_lint_catches_a_sum_seeded_with_zero(tmp_path):
    # the review's first finding: `sum = 0; sum += p` keeps one more fadd per spatial lane than the model charges
    report = _broken(tmp_path, "gemm", GEMM, GEMM_KNOBS, "pe_prod[pe_q] = pe_pair;",
                     "pe_prod[pe_q] = pe_pair + (acc_t)0 * pe_prod[0];", where="static acc_t pe(")
    (finding,) = [f for f in report.findings if f.check == "arithmetic" and "adds" in f.message]
    assert report.add_per_iteration == 4 * (3 + 1) + 4 * 3 and "charges 16" in finding.message


def test_lint_catches_a_bank_chosen_at_run_time(tmp_path):
    # j's lanes read B[k][j] from 4 banks; indexing by the pipelined j_o instead puts them at run time
    report = _broken(tmp_path, "gemm", GEMM, GEMM_KNOBS, "const int j = j_o * 4 + j_u;",
                     "const int j = j_u * 4 + j_o;")
    assert any(f.check == "banks" and "j_o" in f.message and "compute_tile" in f.where for f in report.findings)


def test_lint_catches_a_pipeline_on_a_loop_of_one_iteration(tmp_path):
    report = _broken(tmp_path, "gemm", GEMM, GEMM_KNOBS, "pe_i: for (int i_o = 0; i_o < 16; ++i_o) {",
                     "pe_one: for (int one = 0; one < 1; ++one) {\n#pragma HLS PIPELINE II=1\n }\n"
                     "pe_i: for (int i_o = 0; i_o < 16; ++i_o) {")
    assert any(f.check == "pipeline" and "pe_one" in f.message for f in report.findings)


def test_lint_catches_an_ii_the_model_did_not_predict(tmp_path):
    report = _broken(tmp_path, "gemm", GEMM, GEMM_KNOBS, "#pragma HLS PIPELINE II=1", "#pragma HLS PIPELINE II=2")
    assert any(f.check == "ii" for f in report.findings)


def test_lint_catches_a_guarded_scalar_read(tmp_path):
    """The review's second finding: a read process that loads one guarded float at a time from a scalar
    pointer is what Vitis will not widen into the port words the model charges."""
    op = get_builtin("gemm").instantiate(GEMM)
    project, _, _ = build(op, tmp_path, knobs=GEMM_KNOBS)
    assert lint(project).ok
    kernel = project / "src" / "kernel.cpp"
    text = kernel.read_text()
    read_a = text[text.index("static void read_buf0_A"):text.index("static void read_buf1_B")]
    word_read = re.search(r"const A_word_t hdse_cur = A\[[^;]*\];", read_a).group(0)
    element = re.search(r"const float hdse_elem = [^;]*;", read_a).group(0)
    broken = (read_a.replace("const A_word_t *A", "const float *A").replace(word_read, "")
              .replace(element, "const float hdse_elem = (x0 < 16) ? A[hdse_a + hdse_l] : 0.0f;"))
    text = text.replace(read_a, broken).replace("gemm_kernel(const A_word_t *A", "gemm_kernel(const float *A")
    text = text.replace("read_buf0_A(A, ", "read_buf0_A((const float *)A, ")
    kernel.write_text(text)
    header = project / "src" / "kernel.h"
    header.write_text(header.read_text().replace("gemm_kernel(const A_word_t *A", "gemm_kernel(const float *A"))
    report = lint(project)
    ports = [f for f in report.findings if f.check == "ports"]
    assert ports and all("A" in f.message for f in ports), [str(f) for f in report.findings]
    assert any("const float *, not a port word" in f.message for f in ports)
    # and a lane taken from a word still in DDR is not a whole-word access either
    project2, _, _ = build(op, tmp_path / "lane", knobs=GEMM_KNOBS)
    kernel = project2 / "src" / "kernel.cpp"
    text = kernel.read_text()
    kernel.write_text(re.sub(r"const A_word_t hdse_cur = (A\[[^;]*\]);", r"const A_word_t hdse_cur = \1; "
                             r"const float hdse_lane = \1[0]; (void)hdse_lane;", text, count=1))
    (finding,) = [f for f in lint(project2).findings if f.check == "ports"]
    assert "in place" in finding.message


def test_lint_catches_a_read_process_the_model_did_not_charge(tmp_path):
    """The model's words a block and word II, read back from the emitted read process."""
    op = get_builtin("gemm").instantiate(GEMM)
    project, _, design = build(op, tmp_path, knobs=GEMM_KNOBS)
    a = design["buffers"][0]
    assert (a["word_ii"], a["beats_per_load"]) == (4, 16) and lint(project).ok
    kernel = project / "src" / "kernel.cpp"
    text = kernel.read_text()
    read_a = text[text.index("static void read_buf0_A"):text.index("static void read_buf1_B")]
    broken = read_a.replace("#pragma HLS PIPELINE II=4", "#pragma HLS PIPELINE II=1").replace(
        "hdse_k < 16; ++hdse_k", "hdse_k < 8; ++hdse_k")
    assert broken != read_a
    kernel.write_text(text.replace(read_a, broken))
    found = sorted(f.message for f in lint(project).findings if f.check == "transfer")
    assert found == ["the process moves 8 words a block; the model charges 16",
                     "the word loop asks for II=1; the model charges 4"]


def test_stand_in_blocks_are_poisoned_and_locks_strict(tmp_path):
    """A block element read before it is written shows in the output (NaN), and a nested lock aborts."""
    op = get_builtin("gemm").instantiate(GEMM)
    project, _, _ = build(op, tmp_path, knobs=GEMM_KNOBS)
    kernel = project / "src" / "kernel.cpp"
    text = kernel.read_text()
    # the read process of A skips its first row: that row of the block keeps the poison
    poisoned = text.replace("buf[x0][x1] = (float)(hdse_elem);", "if (x0 > 0) buf[x0][x1] = (float)(hdse_elem);", 1)
    assert poisoned != text
    kernel.write_text(poisoned)
    result = csim(project)
    assert not result.passed and result.mismatches > 0
    kernel.write_text(text.replace("hls::write_lock<out_block_t> obuf(out_s);",
                                   "hls::write_lock<out_block_t> obuf(out_s);\n"
                                   "hls::write_lock<out_block_t> again(out_s);", 1))
    with pytest.raises(Exception, match="more than once"):
        csim(project)


def test_lint_refuses_a_design_record_without_the_figures_it_checks(tmp_path):
    op = get_builtin("gemm").instantiate(GEMM)
    project, _, _ = build(op, tmp_path, knobs=GEMM_KNOBS)
    record = json.loads((project / "design.json").read_text())
    del record["predicted"]["units"]
    (project / "design.json").write_text(json.dumps(record))
    with pytest.raises(LintError, match="older hetero_dse; run explore again"):
        lint(project)
    (project / "design.json").write_text("{not json")
    with pytest.raises(LintError, match="not a design record"):
        lint(project)


@pytest.mark.parametrize("board", ["u280", "zcu104"])
def test_build_files_carry_the_clock_and_interface_settings(board, tmp_path):
    """Both HLS launchers, the same m_axi settings for run_hls.tcl and v++ -c, the clock uncertainty made
    explicit, and an IP export (no v++ targets) on a Zynq board."""
    b = load_board(board)
    op = get_builtin("gemm").instantiate(shape="small:s2")
    e = explore(op, FpgaTarget(b), search=Search(budget=500, top_k=1))
    op_d, analysis = e.best_operator()
    point, design = e.best_design
    project = write_project(tmp_path / board, op_d, analysis, point, design, b)
    run = (project / "run_hls.tcl").read_text()
    assert "set_clock_uncertainty $clock_uncertainty" in run and "source [file join $here hls_config.tcl]" in run
    assert "HDSE_STEPS" in run
    config = (project / "hls_config.tcl").read_text()
    assert (f"-m_axi_alignment_byte_size {b.memory.port_bits // 8} -m_axi_max_widen_bitwidth {b.memory.port_bits}"
            in config)
    makefile = (project / "Makefile").read_text()
    assert "vitis-run --mode hls --tcl" in makefile and "vitis_hls -f" in makefile
    if b.platform:
        assert makefile.count("--kernel_frequency $(FREQ_MHZ)") == 2 and "--config vpp_compile.cfg" in makefile
        assert "pre_tcl=hls_config.tcl" in (project / "vpp_compile.cfg").read_text()
        assert (project / "connectivity.cfg").is_file()
    else:
        assert "v++" not in makefile and "\nip:" in makefile
        assert not (project / "connectivity.cfg").exists() and not (project / "vpp_compile.cfg").exists()
    if shutil.which("make"):
        targets = ["csim", "cosim"] + (["xclbin"] if b.platform else ["ip"])
        dry = subprocess.run(["make", "-n", "-C", str(project), *targets], capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
        assert "run_hls.tcl" in dry.stdout
        if b.platform:  # hardware emulation links a kernel object compiled for it, and make keeps both
            emu = subprocess.run(["make", "-n", "-C", str(project), "xclbin", "TARGET=hw_emu"], capture_output=True,
                                 text=True, check=True).stdout
            assert emu.count("-t hw_emu ") == 2 and ".hw_emu.xclbin " in emu and ".hw_emu.xo" in emu
            assert "\nrm " not in emu, emu


def test_a_c_simulation_that_never_ends_is_stopped_in_time_proportional_to_its_work(tmp_path, monkeypatch):
    """Review finding D15: a kernel that never returned was waited for 600 s whatever its size."""
    from hetero_dse.hls import csim as csim_module

    project, _, _ = build(get_builtin("gemm").instantiate(shape="small:s1"), tmp_path, budget=300)
    assert csim_module.run_timeout(project) == csim_module.RUN_FLOOR_S  # a small operator: the floor
    tb = project / "tb" / "tb.cpp"
    tb.write_text(tb.read_text().replace("int main(int argc, char **argv) {",
                                         "int main(int argc, char **argv) {\n  static volatile int spin = 1;\n"
                                         "  while (spin) {}", 1))
    assert "while (spin)" in tb.read_text()
    monkeypatch.setattr(csim_module, "RUN_FLOOR_S", 1.0)
    with pytest.raises(Exception, match=r"ran for more than 1 s .*does not end"):
        csim(project)
