"""``hetero_dse explore``: its options parsed into operators, targets and settings, the run (``hetero_dse.run``)
drawn on the terminal, and what it found printed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import click

from hetero_dse.cli.app import EXIT_INTERRUPTED, Finite, Registered, cli, console, operator_options, warn
from hetero_dse.errors import HeteroDSEError
from hetero_dse.cli.history import db_option, open_db
from hetero_dse.cli.progress_log import LoggedSearch, logged_step
from hetero_dse.explore.registry import explorer_entry, explorer_names
from hetero_dse.explore.settings import GGA_POPULATION, MODEL_STARTS, TL_BATCH, ExplorerSettings
from hetero_dse.hardware.gpus import DEVICES
from hetero_dse.history.match import MATCH_THRESHOLD
from hetero_dse.targets.fpga import DEFAULT_BUDGET
from hetero_dse.targets.registry import TargetRequest, build_targets, target_kinds
from hetero_dse.targets.tuned import TVM_STARTS


def _split_values(values: tuple[str, ...]) -> list[str]:
    """``("float32,int8", "int16")`` -> ``["float32", "int8", "int16"]``."""
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _parse_clocks(values: tuple[str, ...]) -> list[float]:
    clocks = []
    for v in _split_values(values):
        try:
            clocks.append(float(v))
        except ValueError:
            raise HeteroDSEError(f"--clock expects a frequency in MHz such as 250, got {v!r}") from None
    return clocks


@cli.command()
@operator_options
@click.option("--model", "model_name", metavar="NAME|model.py",
              help="A whole network instead of one operator: each distinct layer explored once (see 'hetero_dse "
                   "model').")
@click.option("--input-shape", metavar="N,C,H,W", help="With --model: the example input's shape.")
@click.option("--board", "boards_", metavar="NAME|PATH", multiple=True,
              help="FPGA board (see 'hetero_dse boards'), or a board YAML file; repeat for several.")
@click.option("--target", "targets", multiple=True, type=Registered("target", target_kinds),
              help="What to explore for (repeatable); default: fpga. --board implies fpga.")
@click.option("--trials", default=32, show_default=True, type=click.IntRange(min=1),
              help="CPU/GPU: schedules to measure when no --budget is given (each built, checked and timed in a "
                   "worker process); a GPU roofline estimate, where no GPU is present, scores at least 4,096.")
@click.option("--gpu", "gpu_name", default="h100", show_default=True, type=click.Choice(list(DEVICES)),
              help="GPU whose roofline estimates the schedules when this machine has no CUDA device.")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("hetero_dse_out"),
              show_default=True, help="Where the HLS projects and the report go.")
@click.option("--force", is_flag=True, help="Write into a non-empty output directory, replacing earlier results.")
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(min=1), help="Designs kept per board.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the search and of the test data.")
@click.option("--dtype", "dtypes", multiple=True, metavar="TYPE[,TYPE]",
              help="Data types to explore (FPGA: float32, int16, int8, several at once; GPU: float32, or float16, "
                   "bfloat16 and int8 on the tensor cores); default: the operator's.")
@click.option("--clock", "clocks", multiple=True, metavar="MHZ[,MHZ]",
              help="Clock targets to explore; default: the board's default clock.")
@click.option("--explorer", default="auto", show_default=True, type=Registered("explorer", explorer_names),
              help="; ".join(f"{e.name}: {e.summary}" for e in map(explorer_entry, explorer_names()[1:]))
                   + ". auto: exhaustive for a small FPGA space; on measured CPU/GPU trials gga or tl by the "
                     "history's match score, tl from scratch without history; sa where a model scores designs "
                     "(BENCHMARKS.md).")
@click.option("--match-threshold", default=MATCH_THRESHOLD, show_default=True, type=Finite(0, 1),
              help="auto with a history: the guided GA from this match score (seed 002, eq. 1), transfer "
                   "learning below it.")
@click.option("--starts", type=click.IntRange(min=1), metavar="N",
              help=f"Start points per round (q, p; chains for sa; points per round for random; the population "
                   f"for gga, {GGA_POPULATION} by default; measurements per fit for tl, {TL_BATCH}). Default: "
                   f"{MODEL_STARTS['q']} on FPGA and GPU estimates ({MODEL_STARTS['sa']} chains for sa, "
                   f"{MODEL_STARTS['tl']} a fit for tl), "
                   f"{TVM_STARTS['q']} when measured.")
@click.option("--gamma", default=2.0, show_default=True, type=Finite(min=0),
              help="Start-point rule: a point is picked with probability exp(-gamma (E* - E) / E*).")
@click.option("--patience", type=click.IntRange(min=1), metavar="ROUNDS",
              help="Stop a search when this many rounds in a row find nothing better (annealing on the FPGA model "
                   "without --budget: 150).")
@click.option("--q-state", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Learned state to start from when FILE exists (--explorer q: the Q-network; ppo: the "
                   "policy and the best designs found, proposed first), saved there after the search (warm starts "
                   "on similar operators).")
@click.option("--budget", type=click.IntRange(min=1), metavar="N",
              help=f"Distinct points to evaluate at most on every target: FPGA designs scored, CPU/GPU schedules "
                   f"measured or estimated (default: all for exhaustive, {DEFAULT_BUDGET:,} FPGA designs, "
                   f"--trials schedules, at least 4,096 GPU estimates).")
@click.option("--time-budget", type=Finite(), metavar="SECONDS",
              help="Stop each search after this long; with --model, the whole network's seconds, split over its "
                   "layers by their share of the FLOPs and evenly over the targets.")
@click.option("--io-optimal", is_flag=True,
              help="Prune conv tiles to the I/O lower bound's optimality condition x*y = R*z (seed 001).")
@click.option("--traffic-weight", default=0.01, show_default=True, type=Finite(min=0),
              help="Latency fraction a design may give up per compulsory-traffic of extra DDR bytes (0: latency only).")
@click.option("--csim", "run_csim", is_flag=True, help="C-simulate each best design with g++ after writing it.")
@click.option("--synth", "synth_top", type=click.IntRange(min=1), metavar="K",
              help="Synthesize the K best direct designs of each FPGA exploration with Vitis (see 'hetero_dse "
                   "synth').")
@click.option("--synth-steps", default="csynth", show_default=True, metavar="LIST",
              help="With --synth: csynth, cosim, impl (comma-separated).")
@click.option("--jobs", "synth_jobs", default=1, show_default=True, type=click.IntRange(min=1),
              help="With --synth: local Dask workers.")
@click.option("--scheduler", metavar="ADDRESS", help="With --synth: an existing Dask scheduler instead.")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The FPGA model's constants fitted by 'hetero_dse calibrate' for this board's part.")
@click.option("--rpc", "rpc", metavar="HOST:PORT",
              help="Measure --target cpu/gpu on a device over TVM's RPC: the tracker's address with --rpc-key, or "
                   "one RPC server's without. Built here (the GPU for --gpu's architecture), timed there.")
@click.option("--rpc-key", "rpc_key", metavar="KEY", help="The device's key at the RPC tracker.")
@click.option("--winograd", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="How 3×3 stride-1 convolutions are computed. On the CPU: auto searches Winograd F(2×2, 3×3) and "
                   "F(4×4, 3×3) beside direct convolution, each with --trials, and keeps the fastest as measured; "
                   "on keeps the fastest Winograd; off searches direct only. On the GPU (float32): the same, the "
                   "fastest by the roofline without a GPU, as timed with one. On a board: the network kernel's "
                   "Winograd engine set against the direct design, a network's (its second mode takes 1×1 and linear "
                   "layers) or one 3×3 convolution's: on, off, or auto, the faster by the model (for one operator "
                   "in float32 only: in int8 the network kernel requantises its output).")
@click.option("--batch", default=1, show_default=True, type=click.IntRange(min=1), metavar="N",
              help="With --model and a board: the images each compute unit of the network kernel's throughput "
                   "design runs at a time: each convolution once an image, each linear layer once over all N (its "
                   "weights read once, not N times). Its images a second are for that batch, its latency the "
                   "batch's.")
@db_option
@click.option("--no-history", is_flag=True,
              help="Neither read nor write the history database (measured CPU/GPU trials, FPGA best designs).")
def explore(op_file: str | None, builtin: str | None, shape: str | None, params: tuple[str, ...], name: str | None,
            model_name: str | None, input_shape: str | None, boards_: tuple[str, ...], targets: tuple[str, ...],
            trials: int, gpu_name: str, out: Path, force: bool,
            top_k: int, seed: int, dtypes: tuple[str, ...],
            clocks: tuple[str, ...], explorer: str, match_threshold: float, starts: int | None, gamma: float,
            patience: int | None,
            q_state: Path | None, budget: int | None, time_budget: float | None, io_optimal: bool,
            traffic_weight: float, run_csim: bool, synth_top: int | None, synth_steps: str, synth_jobs: int,
            scheduler: str | None, calibration: Path | None, rpc: str | None, rpc_key: str | None, db: str | None,
            winograd: str, batch: int, no_history: bool) -> None:
    """Find the best FPGA accelerator (Vitis HLS project) and/or CPU schedule (TVM module) for an operator.

    \b
    Examples:
      hetero_dse explore --op conv2d --shape yolo:C1 --board vu9p
      hetero_dse explore examples/gemm.py --board u280 --dtype float32,int8 --csim
      hetero_dse explore --op conv2d --shape yolo:C8 --target cpu --trials 64
      hetero_dse explore --op gemm --target gpu --gpu v100    (roofline estimate without a GPU)
    """
    from hetero_dse.cli.render import rows_table
    from hetero_dse.cli.targets import resolve_operators
    from hetero_dse.run.engine import RunSettings, execute
    from hetero_dse.run.synth import SynthSettings
    from hetero_dse.targets.base import Search
    from hetero_dse.units import fmt_seconds

    explorer_settings = ExplorerSettings(explorer, starts, gamma, patience, q_state, match_threshold)
    if time_budget is not None and time_budget <= 0:
        raise HeteroDSEError(f"--time-budget must be positive, got {time_budget:g} seconds")
    wanted = set(targets) | ({"fpga"} if boards_ else set())
    if not wanted:
        wanted = {"fpga"}
    if "fpga" in wanted and not boards_:
        raise HeteroDSEError("FPGA exploration needs a board: add --board NAME (see 'hetero_dse boards'), "
                             "or choose --target cpu or gpu")
    if run_csim and "fpga" not in wanted:
        raise HeteroDSEError("--csim C-simulates FPGA designs: add --board NAME (CPU and GPU schedules are checked "
                             "against the reference as they are written)")
    if winograd == "on" and rpc is not None and "cpu" in wanted:
        raise HeteroDSEError("--winograd on is for this machine's CPU: a CPU over --rpc is searched by direct "
                             "convolution only; leave --winograd out")
    if explorer != "auto" and explorer_entry(explorer).enumerates and wanted & {"cpu", "gpu"}:
        others = [n for n in explorer_names()[1:] if not explorer_entry(n).enumerates]
        raise HeteroDSEError(f"the {explorer} explorer enumerates FPGA spaces only; CPU and GPU schedules are "
                             f"measured one by one: choose --explorer {', '.join(others)}")
    if batch > 1 and (model_name is None or "fpga" not in wanted):
        raise HeteroDSEError("--batch sets the images a run of a network's FPGA compute units takes: give it with "
                             "--model and --board")
    graph = None
    if model_name is not None:
        if op_file or builtin or shape or params or name:
            raise HeteroDSEError("--model explores a whole network: give it without an op.py, --op, --shape, --param "
                                 "or --name")
        from hetero_dse.cli.model import capture_model

        graph = capture_model(model_name, input_shape)
        if not graph.layers:
            ops = ", ".join(u.op for u in graph.unmapped) or "nothing"
            raise HeteroDSEError(f"{model_name} has no convolution, linear layer or matrix product a built-in "
                                 f"operator covers (it runs {ops}): nothing to explore")
        operators = graph.operators()
    else:
        if input_shape is not None:
            raise HeteroDSEError("--input-shape goes with --model")
        operators = resolve_operators(op_file, builtin, shape, params, name)
    source = str(Path(op_file).resolve()) if op_file else "builtin"
    synth_tool = steps_run = None
    if synth_top is not None:
        from hetero_dse.hls.vitis import find_tool, parse_steps

        if "fpga" not in wanted:
            raise HeteroDSEError("--synth synthesizes FPGA designs: add --board NAME")
        steps_run = parse_steps(synth_steps)
        synth_tool = find_tool()
    calibrated = None
    if calibration is not None:
        from cost_models.calibration import Calibration

        calibrated = Calibration.load(calibration)
    remote = None
    if rpc_key and not rpc:
        raise HeteroDSEError("--rpc-key names a device at a tracker: give the tracker's address with --rpc HOST:PORT")
    if rpc:
        from gpu_cpu.remote import Remote

        if not ({"cpu", "gpu"} & set(wanted)):
            raise HeteroDSEError("--rpc measures CPU or GPU schedules: add --target cpu or --target gpu")
        if {"cpu", "gpu"} <= set(wanted):
            raise HeteroDSEError("--rpc reaches one device: give --target cpu or --target gpu, not both")
        remote = Remote.parse(rpc, rpc_key)
    request = TargetRequest(boards_, tuple(_split_values(dtypes)), tuple(_parse_clocks(clocks)), trials, gpu_name,
                            source, remote, calibrated, run_csim, io_optimal, traffic_weight,
                            algorithm={"on": "winograd", "off": "direct"}.get(winograd, "auto"), batch=batch)
    chosen = build_targets(sorted(wanted), request)
    command = {k: (list(map(str, v)) if isinstance(v, tuple) else v if isinstance(v, int | float | bool | None)
                   else str(v)) for k, v in click.get_current_context().params.items() if k != "force"}
    synth = None if synth_top is None else SynthSettings(synth_top, steps_run, synth_tool, synth_jobs, scheduler)
    settings = RunSettings(out, Search(seed=seed, budget=budget, time_budget_s=time_budget, top_k=top_k),
                           explorer_settings, force, command, synth)
    # the database is opened (or made) by the engine once every bad input has been said
    result = execute(operators, chosen, settings, events=ConsoleEvents(), graph=graph,
                     open_store=None if no_history else partial(open_db, db))

    console.print(rows_table(result.rows))
    for device in dict.fromkeys(f["device"] for f in result.fusions):
        mine = [f for f in result.fusions if f["device"] == device]
        fused = [f for f in mine if f["fuse"]]
        saved = sum(f["count"] * (sum(f["unfused_s"]) - f["fused_s"]) for f in fused)
        console.print(f"{device}: {len(fused)} of {len(mine)} back-to-back 1×1 convolution pairs fused into one "
                      f"kernel each" + (f", {fmt_seconds(saved)} off the network" if fused else "")
                      + " (report.md says why each one is or is not)")
    for n in result.networks:
        console.print(_network_line(n), soft_wrap=True)  # one line, a path in it unbroken
        if n.get("pipeline"):
            console.print(_pipeline_line(n), soft_wrap=True)
    if graph is not None and (out / "plan.json").is_file():
        for device in json.loads((out / "plan.json").read_text())["devices"]:
            if device.get("run"):
                console.print(_executed_line(graph.name, device), soft_wrap=True)
    console.print(f"Report: {out / 'report.md'}")
    if result.interrupted:
        click.echo("hetero_dse: interrupted; the report holds what was found before the stop", err=True)
        sys.exit(EXIT_INTERRUPTED)
    errors, unwritten = result.errors, result.unwritten
    if errors and graph is not None:  # a network: layers a target could not take are in the report, not an end
        warn(f"{len(errors)} layer searches failed (each reason is in report.md): " + "; ".join(errors))
    elif errors:
        raise HeteroDSEError("; ".join(errors) + "; the other results are in report.md")
    if unwritten and graph is not None:
        warn(f"{len(unwritten)} layers have no project (each reason is in report.md): " + "; ".join(unwritten))
    elif unwritten:
        raise HeteroDSEError("; ".join(unwritten) + "; what was found is in report.md (a smaller shape gets a "
                             "project that C-simulates)")
    if result.failed_checks:
        raise HeteroDSEError("C-simulation failed for " + ", ".join(result.failed_checks) + " (see report.md)")


class ConsoleEvents:
    """The run drawn on the terminal: a progress bar a search, a spinner for the work between, the fidelity
    table of every design synthesized."""

    def __init__(self) -> None:
        self._bar: Any = None

    @contextmanager
    def searching(self) -> Iterator[None]:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        if not console.is_terminal:  # a log file or a pipe: lines it keeps (a bar draws nothing there)
            yield
            return
        with Progress(TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed:,.0f} {task.fields[unit]}"),
                      TextColumn("best {task.fields[best]}"), TimeElapsedColumn(), console=console,
                      transient=not console.is_terminal) as self._bar:
            yield
        self._bar = None

    def search(self, title: str, total: int | None, unit: str) -> _SearchLine | LoggedSearch:
        if self._bar is None:
            return LoggedSearch(title, total, unit)
        return _SearchLine(self._bar, title, total, unit)

    def status(self, text: str):  # noqa: ANN201 -- rich's status context
        return console.status(text) if console.is_terminal else logged_step(text)

    def say(self, text: str) -> None:
        console.print(text)

    def warn(self, text: str) -> None:
        warn(text)

    def validated(self, project: str, validation: dict[str, Any], skipped: bool) -> None:
        from hetero_dse.cli.synth import fidelity_table

        console.print(fidelity_table(project, validation, skipped))


class _SearchLine:
    def __init__(self, bar: Any, title: str, total: int | None, unit: str) -> None:
        self.bar, self.title = bar, title
        self.task = bar.add_task(title, total=total, best="—", unit=unit)

    def update(self, done: int, best: float | None) -> None:
        from hetero_dse.units import fmt_seconds

        self.bar.update(self.task, completed=done, best=fmt_seconds(best) if best else "—")

    def finished(self, evaluations: int) -> None:
        self.bar.update(self.task, total=evaluations, completed=evaluations)

    def failed(self) -> None:
        self.bar.update(self.task, description=f"{self.title}: failed")


def _pipeline_line(n: dict) -> str:
    """The layer-pipelined design's line: images a second, and its project and verdict, or why it has none; or why
    no such design fits (the same sentences as report.md's)."""
    p = n["pipeline"]
    if "why" in p:
        return f"{n['board']}: no layer-pipelined design: {p['why']}"
    where = (f"project {p['directory']}{_csim_words(p.get('check'), 'C-simulation')}" if p.get("directory")
             else f"by the model only; {p.get('project_why', 'no project written')}")
    return f"{n['board']}: layer-pipelined ({p['stages']} stages): {p['fps']:.0f} images a second at batch > 1, {where}"


def _csim_words(check: dict | None, what: str) -> str:
    """``; <what> passed`` (or FAILED, or not run and why) for a C-simulation's record; nothing without one."""
    if not check:
        return ""
    if check.get("passed") is None:
        return f"; C-simulation not run: {check.get('why')}"
    return f"; {what} {'passed' if check['passed'] else 'FAILED'}"


def _executed_line(name: str, device: dict) -> str:
    """One line for a device's plan run as one network: what runs (plan.json's ``run``), its time against torch
    eager's in the same rounds, and why where it is not the plan."""
    from hetero_dse.units import fmt_seconds, fmt_speedup

    eager = device["executed"]["eager_s"]
    why = "".join(f"; {device[k]}" for k in ("fallback", "noise") if device.get(k))
    return (f"{device['device']}: {name} run as one network: {device['run']}, {fmt_seconds(device['latency_s'])} "
            f"against torch eager's {fmt_seconds(eager)} ({fmt_speedup(eager / device['latency_s'], device['loaded'])})"
            f"{why}; plan.json says what to call")


def _network_line(n: dict) -> str:
    """One line for a device's one design for the whole network: its latency, what it runs at, where its project
    is and what its C-simulation said; or why there is none."""
    from hetero_dse.units import fmt_seconds

    if n.get("why"):
        return f"{n['board']}: no one accelerator for the network: {n['why']}"
    verdict = _csim_words(n.get("check"), "C-simulation of every layer")
    bound = n.get("per_layer_sum_s")
    wino = next((e for e in n.get("engines", []) if e["kind"] == "winograd"), None)
    layers = sum(layer["engine"] == "winograd" for layer in n.get("layers", []))
    return (f"{n['board']}: one accelerator for the network ({n['dtype']}): {fmt_seconds(n['latency_s'])} at "
            f"batch 1, {n['fps']:.0f} fps, {n['gops']:.0f} GOPS"
            + (f", {layers} layer(s) on a Winograd F({wino['tile']}×{wino['tile']}) engine" if wino else "")
            + (f" (the layers' own designs sum to {fmt_seconds(bound)}: a bound, not a design)" if bound else "")
            + (f", project {n['directory']}" if n.get("directory") else f"; {n['project_why']}"
               if n.get("project_why") else "") + verdict)
