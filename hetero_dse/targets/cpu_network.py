"""The CPU's network step: the plan run as one network in this process (``CpuTarget.execute_plan``), each
layer's kernel chosen again by its time inside the network, among our algorithms' bests and the library's call.

Alone, timed again and again, a layer keeps its weights and intermediates in cache; inside the network they come
from memory. Winograd's transformed weights are (m+2)²/9 times direct's and its intermediates are written and
read back, so the algorithm that wins alone can lose inside the network: on YOLO-v1 (BENCHMARKS.md, issue 39)
L12's F(2×2) took 4.7 ms alone and 9.4 ms inside the network. So each other algorithm's best is written beside
the layer's module (``alternatives/``) and timed inside the network too."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from gpu_cpu.measure import MeasureResult
from hetero_dse.errors import HeteroDSEError
from hetero_dse.evaluate.measured import Trial
from hetero_dse.ops.winograd import TILE_KNOB
from hetero_dse.targets.tuned import Tuned, algorithm_candidates, read_schedule, recorded_seconds

__all__ = ["ALTERNATIVES", "alternative_modules", "alternatives_of", "in_context", "run_plan", "with_calls"]

#: the folder beside a layer's module that holds each other algorithm's best
ALTERNATIVES = "alternatives"


def alternatives_of(t: Tuned, alternatives_only: bool) -> list[tuple[str, Tuned]]:
    """Each algorithm's best other than ``t``'s chosen, as a ``Tuned`` of its own (its time the one it was
    compared by, as the operator's function), with the folder name it is written under: ``direct``,
    ``winograd_f2``..."""
    if len(t.algorithms) < 2:
        return []
    candidates = algorithm_candidates(t.direct_best, t.searched, alternatives_only)
    out = []
    for (label, point, _), compared in zip(candidates, t.algorithms, strict=True):
        if compared["chosen"] or compared["seconds"] is None or compared["error"]:
            continue
        other = copy.copy(t)
        other.chosen = Trial(point, MeasureResult(compared["seconds"]))
        other.best, other.best_seconds = point, compared["seconds"]
        other.algorithms = [{**a, "chosen": a["algorithm"] == label} for a in t.algorithms]
        out.append((_slug(label, point), other))
    return out


def _slug(label: str, point: Any) -> str:
    return f"winograd_f{point[TILE_KNOB]}" if TILE_KNOB in point else label.lower().replace(" ", "_")


def alternative_modules(out: Path, module: str) -> list[tuple[str, str, float]]:
    """The other algorithms' modules written beside ``module`` (relative to ``out``): each one's algorithm,
    directory (relative to ``out``) and time alone. One that is not a schedule hetero_dse wrote, or recorded no
    time, is left out: they are options, and the layer's own module stands without them."""
    root = out / module / ALTERNATIVES
    found = []
    for directory in sorted(root.iterdir()) if root.is_dir() else ():
        try:
            record = read_schedule(directory)
        except HeteroDSEError:
            continue
        seconds = recorded_seconds(record)
        if seconds is not None:
            found.append((str(record.get("algorithm", directory.name)), str(directory.relative_to(out)), seconds))
    return found


def with_calls(plan: dict[str, Any], calls: dict[str, str], modules: dict[str, str] | None = None) -> dict[str, Any]:
    """``plan`` with each layer's call from ``calls`` (by label; the library's where it names none), our
    module where the call is ours (``modules``' where it names one: another algorithm's)."""
    layers = []
    for e in plan["layers"]:
        call = calls.get(e["layer"], "library")
        module = (modules or {}).get(e["layer"], e.get("our_module"))
        layers.append({**e, "call": call, "module": module if call == "hetero_dse" else None})
    return {**plan, "layers": layers}


def in_context(graph: Any, plan: dict[str, Any], out: Path, library: Any, kernels: dict) -> dict[str, Any]:
    """Each layer's fastest kernel as timed inside the network: each of our algorithms' bests (every layer that
    has a module) against the library's call, each layer's time read in a forward pass of a network of the
    same kind (``layer_times``): one with every layer the library's call, one with every layer our module, and
    one per further algorithm, each layer with one there (the rest their own module)."""
    from gpu_cpu.network import PlannedNetwork, layer_times

    # per layer: (algorithm, module directory, time alone), the layer's own module first (its time alone is the
    # report's: not needed here)
    options: dict[str, list[tuple[str, str, float | None]]] = {}
    for e in plan["layers"]:
        if e.get("our_module"):
            options[e["layer"]] = [(e.get("our_algorithm") or e.get("algorithm") or "direct", e["our_module"], None),
                                   *alternative_modules(out, e["our_module"])]
    library_times = layer_times(library, graph.example)
    ours: dict[str, dict[str, float]] = {label: {} for label in options}  # by module directory
    for rank in range(max((len(o) for o in options.values()), default=0)):
        modules = {label: o[rank if rank < len(o) else 0][1] for label, o in options.items()}
        network = PlannedNetwork(graph, with_calls(plan, dict.fromkeys(options, "hetero_dse"), modules), out,
                                 kernels=kernels)
        timed = layer_times(network, graph.example)
        for label, o in options.items():
            if rank < len(o) and label in timed:
                ours[label][o[rank][1]] = timed[label]
    calls, modules, algorithms, alone = {}, {}, {}, {}
    for e in plan["layers"]:
        label = e["layer"]
        theirs = library_times[label]
        mine = min(ours.get(label, {}).items(), key=lambda kv: kv[1], default=None)
        calls[label] = "hetero_dse" if mine is not None and mine[1] < theirs else "library"
        if calls[label] == "hetero_dse":
            algorithm, module, seconds = next(o for o in options[label] if o[1] == mine[0])
            modules[label], algorithms[label] = module, algorithm
            if seconds is not None:  # another algorithm's module than the layer's own
                alone[label] = seconds
    names = {label: {module: algorithm for algorithm, module, _ in o} for label, o in options.items()}
    times = {label: {"hetero_dse": min(ours[label].values()) if ours.get(label) else None,
                     "library": library_times[label],
                     **({"algorithms": {names[label][m]: t for m, t in ours[label].items()}}
                        if len(ours.get(label, {})) > 1 else {})}
             for label in calls}
    return {"calls": calls, "modules": modules, "algorithms": algorithms, "alone_s": alone, "times": times}


def run_plan(graph: Any, plan: dict[str, Any], out: Path) -> dict[str, Any]:
    """The network run as one forward pass in this process, our kernels on torch's OpenMP team
    (``gpu_cpu/network.py``), in up to three variants: ``plan`` (its device in plan.json: each layer's
    faster kernel timed alone), every layer the library's call, and ``context``: each layer's fastest kernel
    timed inside the network (``in_context``). Each is checked against torch eager and timed against it in
    alternating rounds."""
    from gpu_cpu.conditions import is_loaded
    from gpu_cpu.network import PlannedNetwork, time_variants

    kernels: dict = {}  # each module compiled once, whichever variants call it
    variants = {"plan": PlannedNetwork(graph, plan, out, kernels=kernels)}
    dropped: dict[str, str] = {}
    context: dict[str, Any] = {}
    if any(e.get("our_module") for e in plan["layers"]):
        try:
            variants["library"] = PlannedNetwork(graph, with_calls(plan, {}), out)
        except HeteroDSEError as exc:  # a layer torch has no call for: no library variant, no context
            dropped["library"] = str(exc)
        else:
            context = in_context(graph, plan, out, variants["library"], kernels)
            calls, modules = context["calls"], context["modules"]
            changed = any(calls[e["layer"]] != e["call"] or (e["call"] == "hetero_dse" and modules.get(e["layer"])
                                                            != e.get("module")) for e in plan["layers"])
            if changed and "hetero_dse" in calls.values():
                variants["context"] = PlannedNetwork(graph, with_calls(plan, calls, modules), out, kernels=kernels)
            if not any(e["call"] == "hetero_dse" for e in plan["layers"]):
                del variants["library"]  # the plan itself: timing it twice would only race noise against noise
                dropped["library"] = "the plan calls the library for every layer: it is the plan, timed once"
    timed = time_variants(graph.model, variants, graph.example, rounds=5, repeat=5)
    pool = variants["plan"].pool
    rounds = [timed["eager_rounds_s"], *(v["rounds_s"] for v in timed["variants"].values())]
    return {"eager_s": timed["eager_s"], "scale": timed["scale"], "pool": pool.kind, "pool_why": pool.why,
            **{f"{name}_s": v["seconds"] for name, v in timed["variants"].items()},
            **{f"{name}_speedup": v["speedup"] for name, v in timed["variants"].items()},
            # how far apart two figures must be to differ: the widest spread of one's middle rounds (upper over
            # lower quartile), which one round caught under a moment's load does not set
            "spread": max(float(np.percentile(r, 75) / np.percentile(r, 25)) for r in rounds),
            "max_error": max(v["max_error"] for v in timed["variants"].values()),
            "foreign_load": timed["foreign_load"], "loaded": is_loaded(timed["foreign_load"]),
            "dropped": {**dropped, **timed["dropped"]}, "context_calls": context.get("calls"),
            "context_modules": context.get("modules"), "context_algorithms": context.get("algorithms"),
            "context_alone_s": context.get("alone_s"), "layer_times": context.get("times")}
