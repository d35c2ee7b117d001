"""``hetero_dse explore``, ``csim`` and ``replay``: searching, writing what was found, checking it again."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hetero_dse.cli.app import EXIT_INTERRUPTED, cli, console, operator_options
from hetero_dse.errors import HeteroDSEError
from hetero_dse.cli.history import db_option, open_db
from hetero_dse.explore.search import GGA_POPULATION, MODEL_STARTS, TL_BATCH, ExplorerSettings
from hetero_dse.history.match import MATCH_THRESHOLD
from gpu_cpu.tune import TVM_STARTS

#: Designs scored when the user gives no budget to a sampling explorer (they converge well before; BENCHMARKS.md).
DEFAULT_BUDGET = 30_000


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


def _prepare_out(out: Path, force: bool) -> None:
    """Refuse a non-empty output directory without --force; fail early if it cannot be written."""
    if out.exists() and not out.is_dir():
        raise HeteroDSEError(f"output path {out} is a file, not a directory; choose another with --out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise HeteroDSEError(f"output directory {out} is not empty; add --force to overwrite it or choose another "
                             "with --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".hetero_dse-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise HeteroDSEError(f"cannot write to output directory {out}: {exc.strerror or exc}") from None


@cli.command()
@operator_options
@click.option("--board", "boards_", metavar="NAME|PATH", multiple=True,
              help="FPGA board (see 'hetero_dse boards'), or a board YAML file; repeat for several.")
@click.option("--target", "targets", multiple=True, type=click.Choice(["fpga", "cpu", "gpu"]),
              help="What to explore for (repeatable); default: fpga. --board implies fpga.")
@click.option("--trials", default=32, show_default=True, type=click.IntRange(min=1),
              help="CPU/GPU: schedules to measure (each built, checked and timed in a worker process).")
@click.option("--gpu", "gpu_name", default="h100", show_default=True, type=click.Choice(["h100", "v100"]),
              help="GPU whose roofline estimates the schedules when this machine has no CUDA device.")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("hetero_dse_out"),
              show_default=True, help="Where the HLS projects and the report go.")
@click.option("--force", is_flag=True, help="Write into a non-empty output directory, replacing earlier results.")
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(min=1), help="Designs kept per board.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the search and of the test data.")
@click.option("--dtype", "dtypes", multiple=True, metavar="TYPE[,TYPE]",
              help="Data types to explore (float32, int16, int8); default: the operator's.")
@click.option("--clock", "clocks", multiple=True, metavar="MHZ[,MHZ]",
              help="Clock targets to explore; default: the board's default clock.")
@click.option("--explorer", default="auto", show_default=True,
              type=click.Choice(["auto", "exhaustive", "q", "p", "sa", "random", "gga", "tl"]),
              help="q: FlexTensor's Q-learning walk; p: every direction from each start point; sa: simulated "
                   "annealing; random: sampling; gga: guided GA seeded from the history; tl: XGBoost cost model "
                   "trained on the filtered history and this run's measurements. auto: exhaustive for a small "
                   "FPGA space; on measured CPU/GPU trials gga or tl by the history's match score, tl from "
                   "scratch without history; sa where a model scores designs (BENCHMARKS.md).")
@click.option("--match-threshold", default=MATCH_THRESHOLD, show_default=True, type=click.FloatRange(0, 1),
              help="auto with a history: the guided GA from this match score (seed 002, eq. 1), transfer "
                   "learning below it.")
@click.option("--starts", type=click.IntRange(min=1), metavar="N",
              help=f"Start points per round (q, p; chains for sa; points per round for random; the population "
                   f"for gga, {GGA_POPULATION} by default; measurements per fit for tl, {TL_BATCH}). Default: "
                   f"{MODEL_STARTS['q']} on FPGA and GPU estimates ({MODEL_STARTS['sa']} chains for sa), "
                   f"{TVM_STARTS['q']} when measured.")
@click.option("--gamma", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="Start-point rule: a point is picked with probability exp(-gamma (E* - E) / E*).")
@click.option("--patience", type=click.IntRange(min=1), metavar="ROUNDS",
              help="Stop a search when this many rounds in a row find nothing better.")
@click.option("--q-state", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Q-network to start from when FILE exists, saved there after the search (warm starts on "
                   "similar operators).")
@click.option("--budget", type=click.IntRange(min=1), metavar="N",
              help=f"Designs to score at most (default: all for exhaustive, {DEFAULT_BUDGET:,} for the others).")
@click.option("--time-budget", type=float, metavar="SECONDS", help="Stop each search after this long.")
@click.option("--io-optimal", is_flag=True,
              help="Prune conv tiles to the I/O lower bound's optimality condition x*y = R*z (seed 001).")
@click.option("--traffic-weight", default=0.01, show_default=True, type=click.FloatRange(min=0),
              help="Latency fraction a design may give up per compulsory-traffic of extra DDR bytes (0: latency only).")
@click.option("--csim", "run_csim", is_flag=True, help="C-simulate each best design with g++ after writing it.")
@click.option("--synth", "synth_top", type=click.IntRange(min=1), metavar="K",
              help="Synthesize the K best designs of each FPGA exploration with Vitis (see 'hetero_dse synth').")
@click.option("--synth-steps", default="csynth", show_default=True, metavar="LIST",
              help="With --synth: csynth, cosim, impl (comma-separated).")
@click.option("--jobs", "synth_jobs", default=1, show_default=True, type=click.IntRange(min=1),
              help="With --synth: local Dask workers.")
@click.option("--scheduler", metavar="ADDRESS", help="With --synth: an existing Dask scheduler instead.")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The FPGA model's constants fitted by 'hetero_dse calibrate' for this board's part.")
@db_option
@click.option("--no-history", is_flag=True,
              help="Neither read nor write the history database (measured CPU/GPU trials, FPGA best designs).")
def explore(op_file: str | None, builtin: str | None, shape: str | None, params: tuple[str, ...], name: str | None,
            boards_: tuple[str, ...], targets: tuple[str, ...], trials: int, gpu_name: str, out: Path, force: bool,
            top_k: int, seed: int, dtypes: tuple[str, ...],
            clocks: tuple[str, ...], explorer: str, match_threshold: float, starts: int | None, gamma: float,
            patience: int | None,
            q_state: Path | None, budget: int | None, time_budget: float | None, io_optimal: bool,
            traffic_weight: float, run_csim: bool, synth_top: int | None, synth_steps: str, synth_jobs: int,
            scheduler: str | None, calibration: Path | None, db: str | None, no_history: bool) -> None:
    """Find the best FPGA accelerator (Vitis HLS project) and/or CPU schedule (TVM module) for an operator.

    \b
    Examples:
      hetero_dse explore --op conv2d --shape yolo:C1 --board vu9p
      hetero_dse explore examples/gemm.py --board u280 --dtype float32,int8 --csim
      hetero_dse explore --op conv2d --shape yolo:C8 --target cpu --trials 64
      hetero_dse explore --op gemm --target gpu --gpu v100    (roofline estimate without a GPU)
    """
    from hetero_dse.hardware.board import load_board
    from hetero_dse.analysis import analyze
    from hetero_dse.cli.render import cpu_table, explorations_table, gpu_table
    from hetero_dse.cli.targets import resolve_operators
    from hetero_dse.fpga_flow import check_clocks, check_dtypes
    from hetero_dse.fpga_flow import explore as run_explore
    from hetero_dse.space.fpga import SpaceOptions

    settings = ExplorerSettings(explorer, starts, gamma, patience, q_state, match_threshold)
    if time_budget is not None and time_budget <= 0:
        raise HeteroDSEError(f"--time-budget must be positive, got {time_budget:g} seconds")
    wanted = set(targets) | ({"fpga"} if boards_ else set())
    if not wanted:
        wanted = {"fpga"}
    if "fpga" in wanted and not boards_:
        raise HeteroDSEError("FPGA exploration needs a board: add --board NAME (see 'hetero_dse boards'), "
                             "or choose --target cpu or gpu")
    if explorer == "exhaustive" and wanted & {"cpu", "gpu"}:
        raise HeteroDSEError("the exhaustive explorer enumerates FPGA spaces only; CPU and GPU schedules are "
                             "measured one by one: choose --explorer q, p, sa, random, gga or tl")
    if "gpu" in wanted:
        from hetero_dse.hardware.gpus import cuda_toolkit

        cuda_toolkit()
    operators = resolve_operators(op_file, builtin, shape, params, name)
    source = str(Path(op_file).resolve()) if op_file else "builtin"
    boards_loaded = [load_board(b) for b in boards_]
    dtype_list, clock_list = _split_values(dtypes), _parse_clocks(clocks)
    for op in operators:  # every bad input is reported before any search starts
        check_dtypes(op, dtype_list)
        if "cpu" in wanted:
            from gpu_cpu.measure import check_fits_in_memory

            check_fits_in_memory(op, "on the CPU")
    for board in boards_loaded:
        check_clocks(board, clock_list)
    synth_tool = steps_run = None
    if synth_top is not None:
        from hetero_dse.hls.synth import find_tool, parse_steps

        if "fpga" not in wanted:
            raise HeteroDSEError("--synth synthesizes FPGA designs: add --board NAME")
        steps_run = parse_steps(synth_steps)
        synth_tool = find_tool()
    calibrated = None
    if calibration is not None:
        from cost_models.calibration import Calibration

        calibrated = Calibration.load(calibration)
        for board in boards_loaded:
            calibrated.check_part(board.part, _vitis_version())
    store = None if no_history else open_db(db)
    _prepare_out(out, force)

    explorations, interrupted = [], False
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hetero_dse.units import fmt_seconds

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f} designs"),
                  TextColumn("best {task.fields[best]}"), TimeElapsedColumn(), console=console,
                  transient=not console.is_terminal) as bar:
        for op in operators:
            for board in boards_loaded:
                label = f"{op.title} on {board.name}"
                task = bar.add_task(label, total=budget, best="—")

                def progress(done: int, best: float, task: int = task) -> None:
                    bar.update(task, completed=done, best=fmt_seconds(best))

                e = run_explore(op, board, dtypes=dtype_list, clocks=clock_list,
                                options=SpaceOptions(io_optimal=io_optimal), explorer=settings, seed=seed,
                                budget=budget, time_budget_s=time_budget, top_k=top_k, progress=progress,
                                default_budget=DEFAULT_BUDGET, traffic_weight=traffic_weight, history=store,
                                calibration=calibrated)
                bar.update(task, total=e.result.evaluations, completed=e.result.evaluations)
                explorations.append(e)
                if e.result.interrupted:
                    interrupted = True
                    break
            if interrupted:
                break
        tvm_runs: dict[str, list] = {"cpu": [], "gpu": []}
        for kind in ("cpu", "gpu"):
            if kind not in wanted or interrupted:
                continue
            from gpu_cpu.cpu_flow import explore_cpu
            from gpu_cpu.gpu_flow import explore_gpu

            for op in operators:
                where = "this CPU" if kind == "cpu" else f"GPU ({gpu_name} estimate unless one is present)"
                label = f"{op.title} on {where}"
                task = bar.add_task(label, total=trials, best="—")
                flops = analyze(op).flops

                def tvm_progress(done: int, best: float | None, task: int = task, flops: int = flops) -> None:
                    bar.update(task, completed=done, best=f"{flops / best / 1e9:.1f} GFLOPS" if best else "—")

                if kind == "cpu":
                    run = explore_cpu(op, source=source, trials=trials, time_budget_s=time_budget, seed=seed,
                                      explorer=settings, progress=tvm_progress, history=store)
                else:
                    run = explore_gpu(op, device=gpu_name, source=source, trials=trials, time_budget_s=time_budget,
                                      seed=seed, explorer=settings, progress=tvm_progress, history=store)
                bar.update(task, total=len(run.tune.trials), completed=len(run.tune.trials))
                tvm_runs[kind].append(run)
                if run.tune.interrupted:
                    interrupted = True
                    break

    cpu_runs, gpu_runs = tvm_runs["cpu"], tvm_runs["gpu"]
    projects, unwritten, csims, cpu_records, gpu_records = _write_outputs(out, explorations, seed, run_csim,
                                                                           cpu_runs, gpu_runs)
    synthesis = None
    if synth_top is not None and not interrupted:
        synthesis = _synthesize_top(out, explorations, projects, synth_top, steps_run, synth_tool, synth_jobs,
                                    scheduler, store, seed)
        from hetero_dse.report import write_reports

        write_reports(out, explorations, projects, csims, interrupted, cpu_records, gpu_records, unwritten,
                      synthesis)
    if explorations:
        console.print(explorations_table(explorations, csims))
    if cpu_records:
        console.print(cpu_table(cpu_records))
    if gpu_records:
        console.print(gpu_table(gpu_records))
    console.print(f"Report: {out / 'report.md'}")
    if interrupted:
        click.echo("hetero_dse: interrupted; the report holds the designs found before the stop", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if unwritten:
        raise HeteroDSEError("; ".join(f"no HLS project for {explorations[i].op.title} on "
                                       f"{explorations[i].board.name}: {why}" for i, why in unwritten.items())
                             + "; the designs found are in report.md (a smaller shape gets a project that C-simulates)")
    if any(not c["passed"] for c in csims.values()):
        raise HeteroDSEError("C-simulation failed for " + ", ".join(
            projects[i] for i, c in csims.items() if not c["passed"]) + " (see report.md)")


def _write_outputs(out: Path, explorations: list, seed: int, run_csim: bool, cpu_runs: list,
                   gpu_runs: list) -> tuple[dict, dict, dict, list, list]:
    """HLS project of each best design (and its C-simulation), the CPU and GPU modules, then the reports;
    Ctrl-C keeps what is done. Returns the projects, why projects were not written, C-simulations, and the
    CPU and GPU records reported."""
    from gpu_cpu.cpu_flow import write_cpu_artifacts
    from gpu_cpu.gpu_flow import write_gpu_artifacts
    from hetero_dse.hls.csim import csim as run_csim_on
    from hetero_dse.hls.project import TestBenchTooLarge, write_project
    from hetero_dse.report import write_reports

    projects: dict[int, str] = {}
    unwritten: dict[int, str] = {}
    csims: dict[int, dict] = {}
    searches_interrupted = (any(e.result.interrupted for e in explorations)
                            or any(r.tune.interrupted for r in cpu_runs + gpu_runs))
    interrupted = searches_interrupted
    cpu_records, gpu_records = [], []
    try:
        for i, e in enumerate(explorations):
            if not e.designs:
                continue
            op, analysis = e.best_operator()
            point, design = e.best
            try:
                directory = write_project(out / e.label / e.board.name / "hls", op, analysis, point, design,
                                          e.board, seed=seed)
            except TestBenchTooLarge as exc:  # the search's result still goes into the report
                unwritten[i] = str(exc)
                continue
            projects[i] = str(directory.relative_to(out))
            _warn_on_lint(directory, projects[i])
            if run_csim:
                with console.status(f"C-simulating {projects[i]}"):
                    result = run_csim_on(directory)
                csims[i] = {"passed": result.passed, "mismatches": result.mismatches,
                            "max_abs_error": result.max_abs_error, "elements": result.elements,
                            "headers": result.headers}
        for runs, write, kind, records in ((cpu_runs, write_cpu_artifacts, "cpu", cpu_records),
                                           (gpu_runs, write_gpu_artifacts, "gpu", gpu_records)):
            for run in runs:
                directory = None
                if run.tune.best is not None:
                    directory = str(write(out / run.label / kind, run).relative_to(out))
                records.append(run.record(directory))
    except KeyboardInterrupt:
        interrupted = True
    write_reports(out, explorations, projects, csims, interrupted, cpu_records, gpu_records, unwritten)
    if interrupted and not searches_interrupted:
        raise KeyboardInterrupt
    return projects, unwritten, csims, cpu_records, gpu_records


def _synthesize_top(out: Path, explorations: list, projects: dict[int, str], k: int, steps: tuple[str, ...],
                    tool, jobs: int, scheduler: str | None, store, seed: int) -> dict[int, list[dict]]:
    """The K best designs of each exploration synthesized (the best one's project, and ``hls_rank<N>``
    projects for the others), validated against their predictions; by exploration, a summary a design."""
    from hetero_dse.cli.synth import fidelity_table
    from hetero_dse.fpga_flow import with_dtype
    from hetero_dse.analysis import analyze
    from hetero_dse.hls.project import TestBenchTooLarge, write_project
    from hetero_dse.hls.synth import JOB_TIMEOUT_S, SynthJob, synthesize, validate_outcomes

    ranked: list[tuple[int, int, Path]] = []
    for i, e in enumerate(explorations):
        if i not in projects:
            continue
        ranked.append((i, 1, out / projects[i]))
        for rank, (point, design) in enumerate(e.designs[1:k], start=2):
            op = with_dtype(e.op, point["dtype"])
            try:
                directory = write_project(out / e.label / e.board.name / f"hls_rank{rank}", op, analyze(op), point,
                                          design, e.board, seed=seed)
            except TestBenchTooLarge:
                continue
            ranked.append((i, rank, directory))
    jobs_ = [SynthJob.of(directory, steps, JOB_TIMEOUT_S, tool) for _, _, directory in ranked]
    with console.status(f"synthesizing {len(jobs_)} design{'s' if len(jobs_) != 1 else ''} with Vitis "
                        f"{tool.version}"):
        outcomes = synthesize(jobs_, store=store, scheduler=scheduler, workers=jobs)
    by_project = {str(Path(s["project"]).resolve()): s for s in validate_outcomes(outcomes)}
    synthesis: dict[int, list[dict]] = {}
    for i, rank, directory in ranked:
        summary = by_project.get(str(Path(directory).resolve()))
        if summary is None:
            continue
        if summary["validation"] is not None:
            console.print(fidelity_table(str(Path(directory).relative_to(out)), summary["validation"],
                                         summary["status"] == "skipped"))
        synthesis.setdefault(i, []).append({"rank": rank, "project": str(Path(directory).relative_to(out)),
                                            "status": summary["status"], "reason": summary["reason"],
                                            "figures": (summary["validation"] or {}).get("figures")})
    return synthesis


def _warn_on_lint(directory: Path, shown: str) -> None:
    """Say on the console when the HLS lint found the written code and design.json apart (its verdict is
    in design.json; ``hetero_dse csim`` fails on it)."""
    import json

    verdict = json.loads((directory / "design.json").read_text()).get("lint", {})
    if verdict.get("ok") is True:
        return
    findings = verdict.get("findings") or [verdict.get("error", "no verdict")]
    console.print(f"[yellow]warning[/]: HLS lint on {shown}: {len(findings)} finding(s), first: {findings[0]} "
                  "(see design.json; hetero_dse csim fails on it)")


def _vitis_version() -> str | None:
    """The version of the Vitis HLS found here, to hold a calibration to (None where there is none)."""
    from hetero_dse.hls.synth import SynthError, find_tool

    try:
        return find_tool().version
    except SynthError:
        return None
