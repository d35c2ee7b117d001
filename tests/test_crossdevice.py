"""The cross-device answer: the table of each operator on every device with its winner, the system-level plan
(per layer and device the faster of the library and our kernel, summed with the ops left to torch), plan.json,
report.html (parsed, every plot embedded and decodable, rendered in a headless browser where one is
installed) and ``hetero_dse report`` rendering it again from disk."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from hetero_dse.crossdevice import across_devices, plan_file, system_plan
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
    assert cpu["speedup_over_eager"] == pytest.approx(10 / 6.7) and cpu["complete"]
    assert cpu["chosen"] == {"hetero_dse": 1, "library": 2}
    # an FPGA has no library: every layer is ours; a layer with no design leaves the sum incomplete
    assert fpga["missing"] == ["net:L3"] and not fpga["complete"] and fpga["speedup_over_eager"] is None
    assert fpga["plan_s"] == pytest.approx(4.0e-3 + 2 * 1.0e-3)
    plan = plan_file(MODEL, [cpu, fpga])
    (device,) = plan["devices"]  # plan.json is for CPUs and GPUs: what a deployment calls
    assert [(e["layer"], e["call"], e["module"]) for e in device["layers"]] == [
        ("net:L1", "hetero_dse", "net:L1/cpu"), ("net:L2", "library", None), ("net:L3", "library", None)]


def test_the_network_speedup_says_when_a_layer_was_timed_under_load():
    from hetero_dse.crossdevice import system_markdown

    calm = system_markdown(MODEL, system_plan(MODEL, ROWS))
    rows = [dict(r, loaded=r["shape"] == "net:L2" and r["kind"] == "cpu") for r in ROWS]
    plan = system_plan(MODEL, rows)
    busy = system_markdown(MODEL, plan)
    assert [d["loaded"] for d in plan] == [True, False]
    assert "UNDER LOAD" not in "\n".join(calm) and "1.49× UNDER LOAD" in "\n".join(busy)


def test_across_devices_names_the_winner_and_its_basis():
    table = across_devices(ROWS + [row("net:L1", "h100 (estimate)", "gpu", 0.1e-3, basis="estimate")])
    first = next(e for e in table if e["shape"] == "net:L1")
    assert set(first["devices"]) == {"cpu0", "vu9p", "h100 (estimate)"}
    assert first["winner"] == "h100 (estimate)" and first["winner_basis"] == "estimate"
    second = next(e for e in table if e["shape"] == "net:L2")
    assert second["winner"] == "vu9p" and second["winner_basis"] == "model"


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


def test_report_html_is_one_self_contained_page_with_every_plot():
    report = {"generator": "hetero_dse test", "complete": False, "rows": ROWS, "errors": ["one search failed"],
              "across": across_devices(ROWS),
              "explorations": [{"operator": "conv2d", "shape": "net:L1", "board": "vu9p",
                                "convergence": [[1, 3.0], [40, 1.5], [300, 1.0]],
                                "pareto": [{"latency_s": 4e-3, "dsp": 100, "bram18k": 4},
                                           {"latency_s": 2e-3, "dsp": 400, "bram18k": 16}],
                                "synthesis": [{"figures": [{"figure": "DSP", "predicted": 400, "reported": 410},
                                                           {"figure": "LUT", "predicted": 9e4, "reported": 1e5}]}]}],
              "cpu": [{"operator": "conv2d", "shape": "net:L1", "convergence": [[8, 2e-3], [16, 1e-3]]}],
              "gpu": [], "model": {**MODEL, "devices": system_plan(MODEL, ROWS)}}
    text = render_html(report)
    page = check_page(text)
    # per-operator comparison, roofline, convergence, Pareto front, predicted against synthesized
    assert len(page.images) == 5
    assert "Incomplete" in text and "one search failed" in text and "Whole model: net" in text
    assert page.tables >= 3  # across devices, whole model, its per-layer kernels, the rows
    _render_in_a_browser(text)


def _render_in_a_browser(text: str) -> None:
    """Where a headless Chromium is installed, the page renders to a screenshot."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        return
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        page, shot = Path(tmp) / "report.html", Path(tmp) / "shot.png"
        page.write_text(text)
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                        "--window-size=1200,2000", page.as_uri()], check=True, capture_output=True, timeout=120)
        assert shot.stat().st_size > 10_000


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("google-chrome") is None,
                    reason="no headless browser installed here: the page is checked by parsing it alone")
def test_report_html_renders_in_a_headless_browser():
    _render_in_a_browser(render_html({"rows": ROWS, "across": across_devices(ROWS)}))


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
    assert next(e for e in report["across"] if e["shape"] == "net:L2")["winner"] == "vu9p"
    assert json.loads((merged / "plan.json").read_text())["devices"][0]["device"] == "cpu0"
    assert "vu9p" in r.out  # the cross-device table on the terminal
    r = cli("report", cpu_run, fpga_run)
    assert r.code == 1 and "give it with --out" in r.err
    r = cli("report", tmp_path / "nowhere")
    assert r.code == 1 and "holds no report.json" in r.err and len(r.err.strip().splitlines()) == 1
