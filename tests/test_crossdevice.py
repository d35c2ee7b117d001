"""The cross-device answer: the table of each operator on every device with its winner, the system-level plan
(per layer and device the faster of the library and our kernel, summed with the ops left to torch), plan.json,
report.html (parsed, every plot embedded and decodable, and shown in a headless Chromium: see tests/browser.py
for the opt-out) and ``hetero_dse report`` rendering it again from disk."""

from __future__ import annotations

import base64
import io
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import browser
import pytest

from hetero_dse.crossdevice import across_devices, plan_file, system_markdown, system_plan
from hetero_dse.report_html import render_html


def row(shape, device, kind, seconds, library=None, basis="measured", gflops=10.0, peak=None):
    return {"kind": kind, "operator": "conv2d", "shape": shape, "device": device, "basis": basis,
            "seconds": seconds, "gflops": gflops, "peak_fraction": peak, "bound": None, "library_seconds": library,
            "explorer": "tl", "evaluations": 8, "answered": 0, "failures": 0, "wall_s": 1.0, "interrupted": False,
            "directory": f"{shape}/{kind}", "why_unwritten": None, "check": "pass", "detail": "",
            "speedup_over_library": library / seconds if library and seconds else None, "intensity": 20.0,
            "bandwidth_gbps": 77.0 if kind == "fpga" else None}


MODEL = {"name": "net", "input_shape": [1, 3, 8, 8], "distinct_layers": 3, "layers": 4, "mapped_flops": 1,
         "unmapped": [{"op": "max_pool2d", "count": 1, "torch_s": 0.5e-3}], "unmapped_torch_s": 0.5e-3,
         "torch_eager_s": 10e-3,
         "layer_table": [{"label": "net:L1", "operator": "conv2d", "count": 1, "epilogue": ["bias", "relu"]},
                         {"label": "net:L2", "operator": "conv2d", "count": 2, "epilogue": ["bias"]},
                         {"label": "net:L3", "operator": "gemm", "count": 1, "epilogue": []}]}
ROWS = [
    row("net:L1", "cpu0", "cpu", 1.0e-3, library=2.0e-3),    # ours faster
    row("net:L2", "cpu0", "cpu", 3.0e-3, library=2.5e-3),    # the library faster: chosen
    row("net:L3", "cpu0", "cpu", None, library=0.2e-3),      # ours failed: the library
    row("net:L1", "vu9p", "fpga", 4.0e-3, basis="model", peak=0.5),
    row("net:L2", "vu9p", "fpga", 1.0e-3, basis="model", peak=0.5),
    row("net:L3", "vu9p", "fpga", None, basis="model"),      # nothing fitted the board
]


def test_the_system_plan_picks_the_faster_kernel_per_layer_and_sums_by_hand():
    cpu, fpga = system_plan(MODEL, ROWS)
    assert [e["choice"] for e in cpu["layers"]] == ["hetero_dse", "library", "library"]
    # by hand: 1.0 + 2 x 2.5 + 0.2 ms of layers, 0.5 ms of max pooling
    assert cpu["plan_s"] == pytest.approx(6.2e-3) and cpu["total_s"] == pytest.approx(6.7e-3)
    # a sum of kernels timed alone is no speedup anyone gets (a 3-layer network's report claimed 8.8x so)
    assert cpu["speedup_over_eager"] is None and cpu["complete"] and "run" not in cpu
    assert cpu["chosen"] == {"hetero_dse": 1, "library": 2}
    # an FPGA has no library: every layer is ours; a layer with no design leaves the sum incomplete
    assert fpga["missing"] == ["net:L3"] and not fpga["complete"] and fpga["speedup_over_eager"] is None
    assert fpga["plan_s"] == pytest.approx(4.0e-3 + 2 * 1.0e-3)
    plan = plan_file(MODEL, [cpu, fpga])
    (device,) = plan["devices"]  # plan.json is for CPUs and GPUs: what a deployment calls
    assert [(e["layer"], e["call"], e["module"]) for e in device["layers"]] == [
        ("net:L1", "hetero_dse", "net:L1/cpu"), ("net:L2", "library", None), ("net:L3", "library", None)]


def test_a_layers_algorithm_is_named_in_the_plan_and_the_per_layer_table():
    rows = [{**ROWS[0], "algorithm": "Winograd F(4×4, 3×3)"}, {**ROWS[1], "algorithm": "direct"}, ROWS[2]]
    (cpu,) = system_plan(MODEL, rows)
    plan = plan_file(MODEL, [cpu])
    assert [e.get("algorithm") for e in plan["devices"][0]["layers"]] == ["Winograd F(4×4, 3×3)", "direct", None]
    table = "\n".join(system_markdown(MODEL, [cpu]))
    assert "| net:L1 | conv2d | 1 | bias + relu | 1 ms (Winograd F(4×4, 3×3)) | 2 ms | hetero_dse |" in table
    assert "| 3 ms (direct) |" in table


#: the plan run as one network (``CpuTarget.execute_plan``'s figures): 8 ms against eager's 10 ms, every layer
#: the library's call 9 ms
RUN = {"plan_s": 8e-3, "plan_speedup": 1.25, "library_s": 9e-3, "library_speedup": 10 / 9, "eager_s": 10e-3,
       "max_error": 1e-7, "scale": 1.0, "pool": "torch", "pool_why": "torch's OpenMP team"}


def test_the_network_figure_is_the_plan_run_as_one_network_and_the_sum_only_bounds_it():
    cpu, _ = system_plan({**MODEL, "executed": {"cpu0": RUN}}, ROWS)
    assert cpu["run"] == "plan" and cpu["total_s"] == 8e-3 and cpu["summed_s"] == pytest.approx(6.7e-3)
    assert cpu["torch_eager_s"] == 10e-3 and cpu["speedup_over_eager"] == 1.25
    (device,) = plan_file(MODEL, [cpu])["devices"]
    assert device["run"] == "plan" and device["latency_s"] == 8e-3 and device["executed"]["plan_speedup"] == 1.25
    assert [e["call"] for e in device["layers"]] == ["hetero_dse", "library", "library"]
    text = "\n".join(system_markdown(MODEL, [cpu]))
    assert "| 8 ms | 10 ms | 1.25× |" in text and "its kernels summed: 6.7 ms" in text
    # summed only: no speedup shown, and said why
    summed = "\n".join(system_markdown(MODEL, system_plan(MODEL, ROWS)))
    assert "| 6.7 ms | 10 ms | — (a sum of kernels, not run) |" in summed


def test_where_our_kernels_lose_inside_the_network_the_plan_calls_the_library():
    """Issue 39 item 3: the plan chooses with the cost it pays. Executed, the plan with our kernels ran slower
    than with every layer the library's call: plan.json then calls the library for every layer."""
    run = {**RUN, "plan_s": 9.5e-3, "plan_speedup": 10 / 9.5}
    cpu, _ = system_plan({**MODEL, "executed": {"cpu0": run}}, ROWS)
    assert cpu["run"] == "library calls" and cpu["total_s"] == 9e-3
    assert cpu["speedup_over_eager"] == pytest.approx(10 / 9)
    assert cpu["chosen"] == {"hetero_dse": 0, "library": 3}
    (device,) = plan_file(MODEL, [cpu])["devices"]
    assert [(e["call"], e["module"]) for e in device["layers"]] == [("library", None)] * 3
    assert device["fallback"] == ("the plan run as one network took 9.5 ms, 1.05× torch eager (10 ms); with every "
                                  "layer the library's call 9 ms, 1.11×: our kernels cost more inside the network "
                                  "than alone; call the library")
    assert "noise" not in device and not device["loaded"]
    # the same, its rounds spread 15 %: a 1.11x against eager is said to be within it
    (noisy,) = plan_file(MODEL, system_plan({**MODEL, "executed": {"cpu0": {**run, "spread": 1.15}}}, ROWS))["devices"]
    assert noisy["noise"] == "library calls at 1.11× torch eager is within the rounds' spread (15 %)"


def test_where_layers_choose_by_their_time_inside_the_network_the_plan_says_so():
    """Issue 39 item 3: a layer timed alone keeps its weights in cache; inside the network they come from memory.
    The variant that chose each layer by its time inside the network ran fastest: plan.json calls what it chose."""
    run = {**RUN, "context_s": 7e-3, "context_speedup": 10 / 7,
           "context_calls": {"net:L1": "library", "net:L2": "hetero_dse", "net:L3": "library"}}
    cpu, _ = system_plan({**MODEL, "executed": {"cpu0": run}}, ROWS)
    assert cpu["run"] == "plan timed in the network" and cpu["total_s"] == 7e-3
    assert [(e["choice"], e["chosen_s"]) for e in cpu["layers"]] == [("library", 2e-3), ("hetero_dse", 3e-3),
                                                                     ("library", 0.2e-3)]
    assert cpu["plan_s"] == pytest.approx(2e-3 + 2 * 3e-3 + 0.2e-3)
    (device,) = plan_file(MODEL, [cpu])["devices"]
    assert [(e["call"], e["module"], e["our_module"]) for e in device["layers"]] == [
        ("library", None, "net:L1/cpu"), ("hetero_dse", "net:L2/cpu", "net:L2/cpu"), ("library", None, "net:L3/cpu")]
    # inside the network another algorithm's best of L2 (written beside its module) ran fastest: plan.json calls
    # that module, names its algorithm, and its time alone is the one summed
    other = {**run, "context_modules": {"net:L2": "net:L2/cpu/alternatives/direct"},
             "context_algorithms": {"net:L2": "direct"}, "context_alone_s": {"net:L2": 3.5e-3}}
    cpu, _ = system_plan({**MODEL, "executed": {"cpu0": other}}, ROWS)
    assert cpu["plan_s"] == pytest.approx(2e-3 + 2 * 3.5e-3 + 0.2e-3)
    (device,) = plan_file(MODEL, [cpu])["devices"]
    second = device["layers"][1]
    assert (second["call"], second["module"], second["algorithm"], second["seconds"]) == (
        "hetero_dse", "net:L2/cpu/alternatives/direct", "direct", 3.5e-3)
    # the layer's own module stays ours, its algorithm and time alone named apart from the one called
    assert second["our_module"] == "net:L2/cpu" and "our_algorithm" not in second  # the row named none
    assert cpu["layers"][1]["ours_s"] == 3e-3 and cpu["layers"][1]["directory"] == "net:L2/cpu"
    assert "| 3 ms | 2.5 ms | hetero_dse (direct, 3.5 ms alone) |" in "\n".join(system_markdown(MODEL, [cpu]))
    rows = [ROWS[0], {**ROWS[1], "algorithm": "Winograd F(2×2, 3×3)"}, *ROWS[2:]]
    (device,) = plan_file(MODEL, system_plan({**MODEL, "executed": {"cpu0": other}}, rows)[:1])["devices"]
    assert (device["layers"][1]["algorithm"], device["layers"][1]["our_algorithm"]) == ("direct",
                                                                                       "Winograd F(2×2, 3×3)")
    # a tie between the plan and a variant keeps the plan
    tie = {**RUN, "library_s": RUN["plan_s"], "library_speedup": RUN["plan_speedup"]}
    assert system_plan({**MODEL, "executed": {"cpu0": tie}}, ROWS)[0]["run"] == "plan"


def test_a_plan_that_runs_slower_than_eager_falls_back_to_eager_and_says_so():
    """Issue 39 item 3: a user who took plan.json into production got a network 0.86x eager."""
    slow = {**RUN, "plan_s": 12.5e-3, "plan_speedup": 0.8, "library_s": 10.5e-3, "library_speedup": 10 / 10.5}
    cpu, _ = system_plan({**MODEL, "executed": {"cpu0": slow}}, ROWS)
    assert cpu["run"] == "torch eager" and cpu["total_s"] == 10e-3 and cpu["speedup_over_eager"] == 1.0
    assert cpu["fallback"] == ("the plan run as one network took 12.5 ms, 0.80× torch eager (10 ms); with every "
                               "layer the library's call 10.5 ms, 0.95×: run torch eager")
    (device,) = plan_file(MODEL, [cpu])["devices"]
    assert device["run"] == "torch eager" and device["fallback"] == cpu["fallback"]
    # a deployment that reads the layers runs none of ours (the bench ran 11 of our kernels from such a plan)
    assert [(e["call"], e["module"]) for e in device["layers"]] == [("torch eager", None)] * 3
    assert cpu["chosen"] == {"hetero_dse": 0, "library": 0}
    text = "\n".join(system_markdown(MODEL, [cpu]))
    assert "**torch eager**: the plan run as one network took 12.5 ms" in text


def test_the_network_speedup_says_when_a_layer_was_timed_under_load():

    model = {**MODEL, "executed": {"cpu0": RUN}}
    calm = system_markdown(model, system_plan(model, ROWS))
    rows = [dict(r, loaded=r["shape"] == "net:L2" and r["kind"] == "cpu") for r in ROWS]
    plan = system_plan(model, rows)
    busy = system_markdown(model, plan)
    assert [d["loaded"] for d in plan] == [True, False]
    # the plan chose between kernels on a timing taken under load: its figure is flagged
    assert "UNDER LOAD" not in "\n".join(calm) and "1.25× UNDER LOAD" in "\n".join(busy)


def test_the_winner_is_the_fastest_measurement_and_faster_predictions_are_named_beside_it():
    """Issue 39 item 4: the winner ranked the FPGA model's prediction and a GPU roofline estimate with the CPU's
    measurement as equals (the estimate "won" net:L1 at 0.1 ms against 1 ms measured) without saying so."""
    from hetero_dse.crossdevice import across_markdown

    rows = ROWS + [row("net:L1", "h100 (estimate)", "gpu", 0.1e-3, basis="estimate"),
                   row("net:L4", "vu9p", "fpga", 2.0e-3, basis="model"),
                   row("net:L4", "h100 (estimate)", "gpu", 0.5e-3, basis="estimate")]
    table = {e["shape"]: e for e in across_devices(rows)}
    assert set(table["net:L1"]["devices"]) == {"cpu0", "vu9p", "h100 (estimate)"}
    # net:L1: measured 1 ms on cpu0, model 4 ms, estimate 0.1 ms; net:L2: measured 3 ms, model 1 ms
    assert (table["net:L1"]["winner"], table["net:L1"]["winner_basis"]) == ("cpu0", "measured")
    assert table["net:L1"]["unmeasured_faster"] == ["h100 (estimate)"]  # the model's 4 ms is slower: not named
    assert (table["net:L2"]["winner"], table["net:L2"]["unmeasured_faster"]) == ("cpu0", ["vu9p"])
    # nothing measured: the fastest prediction, its basis said
    assert (table["net:L4"]["winner"], table["net:L4"]["winner_basis"]) == ("h100 (estimate)", "estimate")
    assert table["net:L3"]["winner"] is None  # no device has a time
    cells = {line.split(" | ")[0][2:]: line.split(" | ")[-1] for line in across_markdown(list(table.values()))
             if line.startswith("| conv2d")}
    assert cells == {"conv2d net:L1": "**cpu0**; faster unmeasured: h100 (estimate) |",
                     "conv2d net:L2": "**cpu0**; faster unmeasured: vu9p (model) |",
                     "conv2d net:L3": "**—** |",
                     "conv2d net:L4": "**h100 (estimate)** (nothing measured) |"}
    only_model = across_devices([row("net:L5", "vu9p", "fpga", 2.0e-3, basis="model"),
                                 row("net:L5", "u280", "fpga", 3.0e-3, basis="model")])
    assert across_markdown(only_model)[-2].endswith("| **vu9p** (model, nothing measured) |")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.tags, self.tables = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.tables += tag == "table"
        if tag == "img":
            self.images.append(dict(attrs)["src"])


def check_page(text: str) -> _Page:
    """The page parses, and every image is embedded (a data URI) and decodes as a PNG of some size."""
    from PIL import Image

    page = _Page()
    page.feed(text)
    page.close()
    assert page.tags[:1] == ["html"] and "body" in page.tags
    assert page.images, "no plot in the page"
    for src in page.images:
        assert src.startswith("data:image/png;base64,")  # nothing fetched from elsewhere
        image = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        image.verify()
        assert image.size[0] > 300 and image.size[1] > 200
    return page


def full_report() -> dict:
    """A report with something for every plot: the page's five figures."""
    return {"generator": "hetero_dse test", "complete": False, "rows": ROWS, "errors": ["one search failed"],
            "across": across_devices(ROWS),
            "explorations": [{"operator": "conv2d", "shape": "net:L1", "board": "vu9p",
                              "convergence": [[1, 3.0], [40, 1.5], [300, 1.0]],
                              "pareto": [{"latency_s": 4e-3, "dsp": 100, "bram18k": 4},
                                         {"latency_s": 2e-3, "dsp": 400, "bram18k": 16}],
                              "synthesis": [{"figures": [{"figure": "DSP", "predicted": 400, "reported": 410},
                                                         {"figure": "LUT", "predicted": 9e4, "reported": 1e5}]}]}],
            "cpu": [{"operator": "conv2d", "shape": "net:L1", "convergence": [[8, 2e-3], [16, 1e-3]]}],
            "gpu": [], "model": {**MODEL, "devices": system_plan(MODEL, ROWS)}}


def test_report_html_is_one_self_contained_page_with_every_plot():
    text = render_html(full_report())
    page = check_page(text)
    # per-operator comparison, roofline, convergence, Pareto front, predicted against synthesized
    assert len(page.images) == 5
    assert "Incomplete" in text and "one search failed" in text and "Whole model: net" in text
    assert page.tables >= 3  # across devices, whole model, its per-layer kernels, the rows


#: where the browser test keeps its screenshot after the run (git-ignored)
SCREENSHOT = Path(__file__).resolve().parent / "output" / "report_html.png"


def test_report_html_shows_every_plot_in_a_headless_browser(tmp_path):
    """Chromium loads the page, decodes every plot at its size, and paints each one: the screenshot's pixels
    where the browser laid each plot out are the plot's own PNG (a blank, broken or hidden plot is not)."""
    import numpy as np
    from PIL import Image

    binary = browser.browser()
    text = render_html(full_report())
    plots = [np.asarray(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB"), dtype=float)
             for src in check_page(text).images]
    page = tmp_path / "report.html"
    page.write_text(text)
    images, height = browser.load(binary, page)
    assert len(images) == len(plots) == 5
    for image, plot in zip(images, plots, strict=True):
        assert image.complete and image.natural == (plot.shape[1], plot.shape[0])
        assert image.box[2:] == image.natural  # drawn at its own size: the page is wider than a plot
    shot = tmp_path / "report.png"
    browser.screenshot(binary, page, shot, height)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    shutil.copyfile(shot, SCREENSHOT)
    print(f"report.html in Chromium: {SCREENSHOT}")
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=float)
    assert pixels.shape[:2] == (height, browser.WIDTH)
    for image, plot in zip(images, plots, strict=True):
        left, top = round(image.box[0]), round(image.box[1])
        painted = pixels[top:top + plot.shape[0], left:left + plot.shape[1]]
        assert painted.shape == plot.shape, f"the plot at {image.box} runs off the screenshot"
        assert np.abs(painted - plot).mean() < 2.0  # out of 255: the plot itself, pixel for pixel
        assert (painted.min(axis=2) < 250).mean() > 0.01  # and not a white box (each plot inks 2-23 %)


def test_report_renders_again_and_merges_runs_from_disk(cli, tmp_path):
    cpu_run, fpga_run = tmp_path / "cpu", tmp_path / "fpga"
    for directory, kind in ((cpu_run, "cpu"), (fpga_run, "fpga")):
        directory.mkdir()
        rows = [r for r in ROWS if r["kind"] == kind]
        (directory / "report.json").write_text(json.dumps(
            {"generator": "hetero_dse test", "complete": True, "rows": rows, "errors": [], "explorations": [],
             "cpu": [], "gpu": [], "model": {**MODEL, "devices": system_plan(MODEL, rows)}}))
    r = cli("report", cpu_run)
    assert r.code == 0, r.err
    check_page((cpu_run / "report.html").read_text())
    merged = tmp_path / "both"
    r = cli("report", cpu_run, fpga_run, "--out", merged)
    assert r.code == 0, r.err
    report = json.loads((merged / "report.json").read_text())
    assert {d["device"] for d in report["model"]["devices"]} == {"cpu0", "vu9p"}
    # the CPU's 3 ms measured wins over the FPGA model's 1 ms, which is named beside it
    l2 = next(e for e in report["across"] if e["shape"] == "net:L2")
    assert (l2["winner"], l2["unmeasured_faster"]) == ("cpu0", ["vu9p"])
    assert json.loads((merged / "plan.json").read_text())["devices"][0]["device"] == "cpu0"
    assert "vu9p" in r.out  # the cross-device table on the terminal
    r = cli("report", cpu_run, fpga_run)
    assert r.code == 1 and "give it with --out" in r.err
    r = cli("report", tmp_path / "nowhere")
    assert r.code == 1 and "holds no report.json" in r.err and len(r.err.strip().splitlines()) == 1


def test_the_reports_network_section_says_where_a_word_spreads_over_two_ports():
    """The one accelerator's paragraph names a word wider than the board's port (ZCU102's 128 bits: 32 int8
    activations over two ports), and says nothing of ports where one carries the word."""
    from cost_models.fpga_network_design import explore_network
    from hetero_dse.network_report import network_markdown as _network_markdown
    from hetero_dse.hardware.board import load_board
    from hetero_dse.model.layer_shape import LayerShape

    layers = [(LayerShape("grid", 64, 64, 14, 14, 3, 3, 1, 1, name="c"), 1)]
    lines = {}
    for word in (16, 32):
        design = explore_network(layers, load_board("zcu102"), "int8", lanes=(32,), word=word).to_json()
        lines[word] = "\n".join(_network_markdown({"networks": [design]}))
    assert "(a word of 32 activations a cycle, over 2 ports a part each)" in lines[32]
    assert "a part each" not in lines[16] and "one layout. **Network latency" in lines[16]


def test_an_engines_lanes_and_taps_in_words():
    """The report names the depthwise engine's taps a cycle: a window row's, or a whole window's rows too."""
    from hetero_dse.network_report import _lanes_words

    row = {"kind": "depthwise", "lanes": {"channel": 32}, "taps": 3}
    assert _lanes_words(row, named=True) == "32 channel lanes of 3 taps a cycle"
    assert _lanes_words({**row, "tap_rows": 3}, named=True) == "32 channel lanes of 3 taps × 3 rows a cycle"
    assert _lanes_words({"kind": "grid", "lanes": {"output": 16, "input": 64}}) == "16 × 64 lanes"
