"""Whole networks: the system-level plan (per layer the faster of torch and our tuned kernel, epilogues fused)
against torch eager on this CPU, the search's time, the per-layer split of chosen kernels, and the FPGA
whole-model sums on the boards named.

    .venv/bin/python bench/whole_model.py --models yolo_v1,resnet18 --trials 16 --boards vu9p,u280 \\
        --json bench_whole_model.json

Each network runs ``hetero_dse explore --model NAME --target cpu --trials T --no-history`` (every layer searched
from scratch; its wall time is the search time) and reads the plan from report.json: the chosen kernels' times
(each measured in a worker, the library's beside ours in the same run) summed with the unmapped ops as torch's
profiler timed them, against torch eager timed on the whole network when it was captured. Torch eager is timed
again after the search as a check on the machine's state. The plan's summed latency is per-layer timings added
up; the plan is then also executed (``gpu_cpu/network.py``: the exported graph with each planned layer replaced
by the chosen kernel, checked against eager's output) and timed against torch eager in alternating rounds in
this process, beside the same network with every layer torch's call (batch norm folded). Then
``explore --model NAME --board B...`` gives the FPGA per-layer accelerator sums.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import math
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def explore(args: list[str]) -> tuple[dict, float]:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "hetero_dse", "explore", *args], cwd=ROOT, capture_output=True,
                         text=True)
    wall = time.perf_counter() - start
    out = Path(args[args.index("--out") + 1])
    if not (out / "report.json").is_file():
        sys.exit(f"explore {' '.join(args)} wrote no report (exit {run.returncode}): {run.stderr.strip()[-2000:]}")
    return json.loads((out / "report.json").read_text()), wall


def eager_again(name: str) -> float:
    from hetero_dse.model.capture import time_eager
    from hetero_dse.model.zoo import build

    model, example = build(name, None)
    return time_eager(model, example, repeat=20)


def executed(name: str, out: Path, rounds: int) -> dict:
    """The plan run as one network (gpu_cpu/network.py) against torch eager, in alternating rounds; and the same
    network with every layer torch's call (batch norm folded, as the plan's library layers are)."""
    from gpu_cpu.network import PlannedNetwork, time_against_eager
    from hetero_dse.model.capture import capture
    from hetero_dse.model.zoo import build

    model, example = build(name, None)
    graph = capture(model, example, name, profile=False)
    (plan,) = [d for d in json.loads((out / "plan.json").read_text())["devices"] if d["kind"] == "cpu"]
    # TVM's own pool first: a module binds to the pool registered when it first runs
    two_pools = PlannedNetwork(graph, plan, out, pool="tvm")
    planned = PlannedNetwork(graph, plan, out)
    library = PlannedNetwork(graph, {**plan, "layers": [{**e, "call": "library"} for e in plan["layers"]]}, out)
    result = time_against_eager(model, planned, example, rounds=rounds)
    result["replaced"] = planned.replaced
    result["two_pools"] = time_against_eager(model, two_pools, example, rounds=rounds)
    result["library_only"] = time_against_eager(model, library, example, rounds=rounds)
    return result


def retime_layers(out: Path, rounds: int) -> list[dict]:
    """Each distinct layer's kernel (its ``schedule.json``, epilogue fused) and torch's call for it, timed one
    right after the other in fresh workers, ``rounds`` times: the per-layer figure against oneDNN with the
    machine's noise shared by both sides (as ``bench/cpu_retime.py`` does for single operators)."""
    import statistics

    from gpu_cpu.measure import MeasureJob, Measurer, measure_cpu_job, rebuild_operator, time_torch_isolated

    rows = []
    for path in sorted(out.glob("*/cpu/schedule.json")):
        record = json.loads(path.read_text())
        job = MeasureJob(record["source"], record["operator"], record["params"], record["knobs"],
                         epilogue=tuple(record.get("epilogue", ())),
                         epilogue_axes=tuple(record.get("epilogue_axes", ())))
        op = rebuild_operator(job.source, job.name, job.params, job.epilogue, job.epilogue_axes)
        ours, torch = [], []
        for _ in range(rounds):
            with Measurer(timeout_s=300) as measurer:
                result = measurer.run(measure_cpu_job, job)
            library = time_torch_isolated(op, job.source)
            if result.ok and library is not None:
                ours.append(result.seconds)
                torch.append(library.seconds)
        if not ours:
            continue
        ratios = [t / o for o, t in zip(ours, torch, strict=True)]
        rows.append({"layer": record.get("shape") or record["operator"], "ours_s": ours, "torch_s": torch,
                     "median_ratio": statistics.median(ratios)})
        print(f"    re-timed {rows[-1]['layer']:>16}: ours {min(ours) * 1e3:.3f}-{max(ours) * 1e3:.3f} ms, torch "
              f"{min(torch) * 1e3:.3f}-{max(torch) * 1e3:.3f} ms, median of the rounds' ratios "
              f"{rows[-1]['median_ratio']:.2f}x", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet18,yolo_v1,mobilenet_v2")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--boards", default="vu9p,u280", help="FPGA boards for the per-layer sums ('none': no FPGA)")
    parser.add_argument("--fpga-budget", type=int, default=20000)
    parser.add_argument("--winograd", choices=("auto", "on", "off"), default="auto",
                        help="the CPU's 3×3 stride-1 layers: Winograd searched beside direct (auto), or direct (off)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds of the executed comparison")
    parser.add_argument("--retime", type=int, default=0, metavar="ROUNDS",
                        help="re-time each distinct layer's kernel against torch's call, one after the other in "
                             "fresh workers, this many rounds (0: not)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            cpu_out = Path(tmp) / f"{name}_cpu"
            report, wall = explore(["--model", name, "--target", "cpu", "--trials", str(args.trials), "--no-history",
                                    "--winograd", args.winograd, "--out", str(cpu_out)])
            model = report["model"]
            (cpu,) = [d for d in model["devices"] if d["kind"] == "cpu"]
            after = eager_again(name)
            run = executed(name, cpu_out, args.rounds)
            fpga, fpga_wall = {}, 0.0
            if args.boards != "none":
                fpga_out = Path(tmp) / f"{name}_fpga"
                boards = [a for b in args.boards.split(",") for a in ("--board", b)]
                fpga_report, fpga_wall = explore(["--model", name, *boards, "--budget", str(args.fpga_budget),
                                                  "--no-history", "--out", str(fpga_out)])
                fpga = {d["device"]: {"total_s": d["total_s"], "layers_s": d["plan_s"], "complete": d["complete"]}
                        for d in fpga_report["model"]["devices"]}
            row = {"model": name, "trials_per_layer": args.trials, "search_wall_s": wall,
                   "distinct_layers": model["distinct_layers"], "layers": model["layers"],
                   "plan_s": cpu["total_s"], "plan_layers_s": cpu["plan_s"],
                   "unmapped_torch_s": cpu["unmapped_torch_s"],
                   "tuned_only_s": cpu["tuned_only_s"], "library_only_s": cpu["library_only_s"],
                   "torch_eager_s": cpu["torch_eager_s"], "torch_eager_after_s": after,
                   "speedup_over_eager": cpu["speedup_over_eager"], "chosen": cpu["chosen"],
                   "complete": cpu["complete"],
                   "per_layer": [{k: e.get(k) for k in ("layer", "operator", "count", "epilogue", "ours_s", "library_s",
                                                        "choice", "algorithm")} for e in cpu["layers"]],
                   "fpga": fpga, "fpga_search_wall_s": fpga_wall, "executed": run,
                   # what explore itself ran and reported (CpuTarget.execute_plan): the report's figure
                   "report_run": cpu.get("run"), "report_executed": cpu.get("executed"),
                   "report_speedup": cpu.get("speedup_over_eager"), "report_fallback": cpu.get("fallback")}
            results.append(row)
            row["summed_s"] = cpu.get("summed_s")
            print(f"{name}: report's figure {row['plan_s'] * 1e3:.2f} ms ({cpu.get('run') or 'summed'}; kernels "
                  f"summed {(row['summed_s'] or row['plan_s']) * 1e3:.2f} ms with torch ops "
                  f"{(row['unmapped_torch_s'] or 0) * 1e3:.2f}), torch eager {row['torch_eager_s'] * 1e3:.2f} ms "
                  f"(again after: {after * 1e3:.2f}), speedup {row['speedup_over_eager'] or 0:.2f}x; chosen "
                  f"{row['chosen']}; search {wall:.0f} s; FPGA " + ", ".join(
                      f"{b}: {v['total_s'] * 1e3:.2f} ms" for b, v in fpga.items()), flush=True)
            ran = row["report_executed"] or {}
            print(f"  explore's own run: {row['report_run']} at {row['report_speedup'] or 0:.2f}x eager ("
                  + ", ".join(f"{k} {ran[k + '_speedup']:.2f}x" for k in ("plan", "context", "library")
                              if ran.get(k + "_speedup")) + f"); {row['report_fallback'] or ''}", flush=True)
            lib, two = run["library_only"], run["two_pools"]
            print(f"  executed on {run['pool_why']}: plan {run['plan_s'] * 1e3:.2f} ms against eager "
                  f"{run['eager_s'] * 1e3:.2f} ms ({run['speedup']:.2f}x, max error {run['max_error']:.2g}); on two "
                  f"pools {two['plan_s'] * 1e3:.2f} ms ({two['speedup']:.2f}x); every layer torch's call with batch "
                  f"norm folded {lib['plan_s'] * 1e3:.2f} ms ({lib['speedup']:.2f}x); kernels {run['replaced']}",
                  flush=True)
            for e in row["per_layer"]:
                ours = f"{e['ours_s'] * 1e3:.3f}" if e["ours_s"] else "—"
                lib = f"{e['library_s'] * 1e3:.3f}" if e["library_s"] else "—"
                print(f"  {e['layer']:>14} x{e['count']} {'+'.join(e['epilogue']):>22}  ours {ours} ms  torch {lib} ms"
                      f"  -> {e['choice']}" + (f" ({e['algorithm']})" if e.get("algorithm") else ""))
            if args.retime:
                row["retimed"] = retime_layers(cpu_out, args.retime)
                ratios = [r["median_ratio"] for r in row["retimed"]]
                geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else float("nan")
                print(f"  per layer, re-timed against torch: geometric mean {geomean:.2f}x over {len(ratios)} "
                      f"layers, lowest {min(ratios, default=float('nan')):.2f}x", flush=True)
            if args.json:  # after each network: an interrupted run keeps the networks it measured
                args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
