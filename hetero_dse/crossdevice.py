"""The answer across devices: every operator's best on each device side by side with the winner named, and for
a network the system-level plan (Woodpecker-DL): per layer and device, the faster of the library call and our
tuned kernel, summed over the network with the ops left to torch, against torch eager on the same machine.

Works from report rows (``targets.base.Row`` as JSON), so that ``hetero_dse report DIR`` re-renders it from
``report.json`` without exploring again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hetero_dse.network_run import apply_network_run
from hetero_dse.network_report import network_markdown
from hetero_dse.units import fmt_seconds, fmt_speedup, speedup_flags

__all__ = ["across_devices", "across_markdown", "plan_file", "system_plan", "system_markdown"]


def across_devices(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per operator (and shape): each device's best, and the winner: the fastest of the measured times
    where any device was measured, never ranked against a model's prediction (the FPGA) or a roofline estimate
    (a GPU that is not here) as their equal; ``unmeasured_faster`` names those that predict a shorter time.
    Where nothing was measured the fastest prediction wins, its basis said."""
    table: dict[tuple[str, str | None], dict[str, Any]] = {}
    for r in rows:
        entry = table.setdefault((r["operator"], r["shape"]), {"operator": r["operator"], "shape": r["shape"],
                                                               "devices": {}})
        entry["devices"][r["device"]] = {
            "kind": r["kind"], "basis": r["basis"], "seconds": r["seconds"], "gflops": r["gflops"],
            "peak_fraction": r["peak_fraction"], "library_seconds": r["library_seconds"],
            "speedup_over_library": r.get("speedup_over_library"), "loaded": r.get("loaded", False),
            "unstable": r.get("unstable", False)}
    for entry in table.values():
        timed = [(d["seconds"], name) for name, d in entry["devices"].items() if d["seconds"]]
        measured = [(seconds, name) for seconds, name in timed if entry["devices"][name]["basis"] == "measured"]
        winner = min(measured or timed)[1] if timed else None
        entry["winner"] = winner
        entry["winner_basis"] = entry["devices"][winner]["basis"] if winner else None
        entry["unmeasured_faster"] = [name for seconds, name in sorted(timed) if measured and
                                      entry["devices"][name]["basis"] != "measured" and
                                      seconds < entry["devices"][winner]["seconds"]]
    return list(table.values())


#: how the table names a time's basis
BASIS = {"estimate": "est.", "measured": "meas.", "model": "model"}


def _winner_cell(e: dict[str, Any]) -> str:
    """``**cpu0**``, or with what predicts faster but was not measured (``**cpu0**; faster unmeasured: vu9p
    (model)``); where nothing was measured, the winner with its basis (``**vu9p** (model, nothing measured)``)."""
    winner = e["winner"]
    if winner is None:
        return "**—**"
    if e["winner_basis"] != "measured":
        basis = e["winner_basis"]
        # a device named "h100 (estimate)" says its basis already
        return f"**{winner}** ({'' if basis in winner else basis + ', '}nothing measured)"
    others = []
    for name in e.get("unmeasured_faster") or []:
        basis = BASIS.get(e["devices"][name]["basis"], e["devices"][name]["basis"])
        others.append(name if "estimate" in name else f"{name} ({basis})")
    return f"**{winner}**" + ("; faster unmeasured: " + ", ".join(others) if others else "")


def across_markdown(across: Sequence[dict[str, Any]]) -> list[str]:
    devices = list(dict.fromkeys(name for e in across for name in e["devices"]))
    if len(devices) < 2:
        return []
    lines = ["## Across devices", "",
             "Each operator's best on every device: latency (basis), GFLOPS, % of that device's peak, speedup over "
             "that device's library (torch, timed on it in the same run). *est.*: a roofline estimate where the "
             "device is absent, never a measurement; *model*: the FPGA model's prediction. The winner is the "
             "fastest measured device; predictions and estimates are not ranked with measurements as their "
             "equals, and those that promise a shorter time are named beside it.", "",
             "| operator | " + " | ".join(devices) + " | winner |", "|---" * (len(devices) + 2) + "|"]
    for e in across:
        cells = []
        for name in devices:
            d = e["devices"].get(name)
            if d is None or d["seconds"] is None:
                cells.append("—")
                continue
            basis = BASIS.get(d["basis"], d["basis"])
            text = f"{fmt_seconds(d['seconds'])} ({basis})"
            if d["gflops"] is not None:
                text += f", {d['gflops']:.1f} GFLOPS"
            if d["peak_fraction"] is not None:
                text += f", {100 * d['peak_fraction']:.0f} % peak"
            if d["speedup_over_library"]:
                # "lib" names the ratio; the flags follow it ("12.10× lib UNDER LOAD (unstable timing)")
                flags = speedup_flags(d.get("loaded", False), bool(d.get("unstable")))
                text += f", {fmt_speedup(d['speedup_over_library'])} lib{flags}"
            cells.append(text)
        operator = e["operator"] + (f" {e['shape']}" if e["shape"] else "")
        lines.append(f"| {operator} | " + " | ".join(cells) + f" | {_winner_cell(e)} |")
    return [*lines, ""]


def system_plan(model: dict[str, Any], rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per device, each layer's kernel: ours or the library's, whichever is faster where both were timed on the
    device (ours where there is no library time: the FPGA, a GPU estimate), and the network's latency as the
    sum of the chosen kernels times their counts plus the ops left to torch. ``model`` is report.json's
    ``model`` (its ``layers``: label, operator, count, epilogue)."""
    devices: dict[str, dict[str, Any]] = {}
    by_shape = {layer["label"]: layer for layer in model["layer_table"]}
    for r in rows:
        layer = by_shape.get(r["shape"])
        if layer is None:
            continue
        d = devices.setdefault(r["device"], {"device": r["device"], "kind": r["kind"], "basis": r["basis"],
                                             "layers": [], "missing": [], "loaded": False})
        ours, library = r["seconds"], r["library_seconds"]
        d["loaded"] = d["loaded"] or bool(r.get("loaded"))
        if ours is None and library is None:
            d["missing"].append(layer["label"])
            continue
        # ours only where it was written: a plan must not call a module that is not there
        unwritten = r["kind"] in ("cpu", "gpu") and not r.get("directory")
        choice = "library" if library is not None and (ours is None or library < ours or unwritten) else "hetero_dse"
        d["layers"].append({"layer": layer["label"], "operator": layer["operator"], "count": layer["count"],
                            "epilogue": layer["epilogue"], "ours_s": ours, "library_s": library, "choice": choice,
                            "chosen_s": library if choice == "library" else ours, "directory": r["directory"],
                            "algorithm": r.get("algorithm")})
    rest = model.get("unmapped_torch_s")
    # an FPGA's network runs on the one accelerator designed for it; its layers' own designs only bound it
    shared = {n["board"]: n for n in model.get("networks", []) if not n.get("why")}
    for d in devices.values():
        searched = {entry["layer"] for entry in d["layers"]} | set(d["missing"])
        d["missing"] += [label for label in by_shape if label not in searched]
        d["fused"] = _fused(model, d)
        d["plan_s"] = (sum(e["chosen_s"] * e["count"] for e in d["layers"])
                       - sum(f["saved_s"] * f["count"] for f in d["fused"]))
        d["tuned_only_s"] = (sum(e["ours_s"] * e["count"] for e in d["layers"])
                             if all(e["ours_s"] is not None for e in d["layers"]) else None)
        d["library_only_s"] = (sum(e["library_s"] * e["count"] for e in d["layers"])
                               if d["layers"] and all(e["library_s"] is not None for e in d["layers"]) else None)
        d["unmapped_torch_s"] = rest
        d["complete"] = not d["missing"]
        if d["kind"] == "fpga" and d["device"] in shared and d["complete"]:
            d["per_layer_bound_s"], d["plan_s"] = d["plan_s"], shared[d["device"]]["latency_s"]
            d["shared_accelerator"] = True
        d["total_s"] = d["plan_s"] + (rest or 0.0)
        # torch eager ran the whole network on this machine's CPU when it was captured
        d["torch_eager_s"] = model.get("torch_eager_s") if d["kind"] == "cpu" else None
        # a sum of kernels timed alone is not a speedup anyone gets: only the plan run as one network is
        d["speedup_over_eager"] = None
        apply_network_run(d, (model.get("executed") or {}).get(d["device"]))
        d["chosen"] = {k: sum(e["choice"] == k for e in d["layers"]) for k in ("hetero_dse", "library")}
    return list(devices.values())


def _fused(model: dict[str, Any], device: dict[str, Any]) -> list[dict[str, Any]]:
    """The device's back-to-back pairs whose fused kernel replaces its two layers' chosen kernels (each time
    the network runs the pair): where it was chosen and checked, and is faster than what the plan chose for the
    two layers (our kernels, or the library's where it was faster)."""
    chosen = {e["layer"]: e for e in device["layers"]}
    out = []
    for f in model.get("b2b", []):
        if f["device"] != device["device"] or not f.get("fuse"):
            continue
        first, second = chosen.get(f["first"]), chosen.get(f["second"])
        if first is None or second is None:
            continue
        saved = first["chosen_s"] + second["chosen_s"] - f["fused_s"]
        if saved > 0:
            out.append({"first": f["first"], "second": f["second"], "count": f["count"], "fused_s": f["fused_s"],
                        "saved_s": saved, "directory": f.get("directory")})
    return out


def plan_file(model: dict[str, Any], plan: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a deployment calls per layer on each CPU/GPU: our module (its directory) or the library."""
    return {"model": model["name"], "input_shape": model["input_shape"],
            "devices": [{"device": d["device"], "kind": d["kind"], "basis": d["basis"],
                         "latency_s": d["total_s"], "complete": d["complete"],
                         # the layers without a kernel yet (an interrupted run): a deployment runs torch's there
                         "missing": list(d["missing"]),
                         # "plan": the layers' calls below; "torch eager": the plan ran slower than eager (why)
                         **({"run": d["run"], "executed": d["executed"]} if "run" in d else {}),
                         **({"fallback": d["fallback"]} if "fallback" in d else {}),
                         **({"noise": d["noise"]} if "noise" in d else {}),
                         **({"loaded": d["loaded"]} if "run" in d else {}),
                         "layers": [_plan_layer(e) for e in d["layers"]],
                         # each run of these two layers back to back is one call of the fused kernel instead
                         "fused": [{"layers": [f["first"], f["second"]], "count": f["count"],
                                    "module": f["directory"], "seconds": f["fused_s"]} for f in d.get("fused", [])]}
                        for d in plan if d["kind"] in ("cpu", "gpu")]}


def _plan_layer(e: dict[str, Any]) -> dict[str, Any]:
    """One layer of plan.json: what it calls (our module, the library, or torch eager) and our kernel for it."""
    called = e.get("called") or {}  # another algorithm's module, chosen inside the network
    algorithm = called.get("algorithm", e.get("algorithm"))
    module = called.get("module", e["directory"]) if e["choice"] == "hetero_dse" else None
    return {"layer": e["layer"], "operator": e["operator"], "count": e["count"], "epilogue": e["epilogue"],
            "call": e["choice"], "module": module,
            # our kernel for the layer, called or not (the network run tries it, and the other algorithms' beside it)
            "our_module": e["directory"],
            # where more than one was searched: direct, or Winograd's tile (of the module called, and of ours)
            **({"algorithm": algorithm} if algorithm else {}),
            **({"our_algorithm": e["algorithm"]} if called and e.get("algorithm") else {}),
            "seconds": e["chosen_s"]}


def system_markdown(model: dict[str, Any], plan: Sequence[dict[str, Any]]) -> list[str]:
    lines = [f"## Whole model: {model['name']} ({'x'.join(map(str, model['input_shape']))})", "",
             f"{model['distinct_layers']} distinct layers, {model['layers']} in all, each explored once, with its "
             "epilogue (bias, residual add, activation) fused. Per layer and device the faster of our kernel and "
             "the library's (where the library was timed on the device) is chosen; the latency is the sum of the "
             "chosen kernels times their counts plus the ops no built-in covers as torch runs them. On an FPGA "
             "these are per-layer accelerators, each using the whole device: their sum is a bound, not a design; "
             "the one accelerator for the network is below. plan.json lists each layer's call.", "",
             "A CPU's total, where its plan is complete, is the plan run as one network in this process (our "
             "kernels on torch's OpenMP threads, each layer checked against torch eager's output) and timed against "
             "torch eager in alternating rounds; the speedup is that ratio. A plan that ran slower than eager falls "
             "back to eager and says why. A sum of kernels each timed alone is a bound, never shown as a speedup: "
             "executed, calls between runtimes cost what no kernel's own timing shows.", "",
             "| device | basis | chosen kernels | ours / library | ops left to torch | total | torch eager | speedup "
             "| complete |", "|---" * 9 + "|"]
    for d in plan:
        rest = "—" if d["unmapped_torch_s"] is None else fmt_seconds(d["unmapped_torch_s"])
        eager = "—" if d["torch_eager_s"] is None else fmt_seconds(d["torch_eager_s"])
        speedup = fmt_speedup(d["speedup_over_eager"], d.get("loaded", False))
        if d["speedup_over_eager"] is None and d["torch_eager_s"] is not None:
            speedup = "— (a sum of kernels, not run)"
        done = "yes" if d["complete"] else f"no: {len(d['missing'])} layers without a time"
        basis = "**estimate**" if d["basis"] == "estimate" else d["basis"]
        if "run" in d:
            basis += (f": the plan run as one network (its kernels summed: {fmt_seconds(d['summed_s'])})"
                      if d["run"] == "plan" else f": **{d['run']}**: {d['fallback']}")
            if d.get("noise"):
                basis += f"; {d['noise']}"
        if d.get("shared_accelerator"):
            bound = fmt_seconds(d["per_layer_bound_s"])
            basis += f": one shared accelerator (the layers' own designs, each alone on the device: {bound})"
        fused = f" ({len(d['fused'])} pairs fused)" if d.get("fused") else ""
        lines.append(f"| {d['device']} | {basis} | {fmt_seconds(d['plan_s'])} | {d['chosen']['hetero_dse']} / "
                     f"{d['chosen']['library']}{fused} | {rest} | {fmt_seconds(d['total_s'])} | {eager} | {speedup} | "
                     f"{done} |")
    for d in plan:
        lines += ["", f"### {d['device']}: kernel per layer", "",
                  "| layer | operator | count | epilogue | ours | library | call |", "|---" * 7 + "|"]
        for e in d["layers"]:
            ours = fmt_seconds(e["ours_s"]) if e["ours_s"] is not None else "—"
            if e.get("algorithm"):  # where more than one was searched
                ours += f" ({e['algorithm']})"
            call = e["choice"]
            if e.get("called"):  # another algorithm's best, chosen by its time inside the network
                call += f" ({e['called']['algorithm']}, {fmt_seconds(e['called']['seconds'])} alone)"
            lines.append(f"| {e['layer']} | {e['operator']} | {e['count']} | {' + '.join(e['epilogue']) or '—'} | "
                         f"{ours} | {fmt_seconds(e['library_s']) if e['library_s'] is not None else '—'} | "
                         f"{call} |")
        lines += _fusion_markdown(model, d)
    lines += network_markdown(model)
    return [*lines, ""]


def _fusion_markdown(model: dict[str, Any], device: dict[str, Any]) -> list[str]:
    pairs = [f for f in model.get("b2b", []) if f["device"] == device["device"]]
    if not pairs:
        return []
    applied = {(f["first"], f["second"]) for f in device.get("fused", [])}
    lines = ["", f"### {device['device']}: back-to-back 1×1 convolutions", "",
             "Pairs where the first layer's result, its epilogue applied, is read by the second alone: Bolt's "
             "persistent fusion computes both in one kernel, the intermediate kept in shared memory "
             "(`gpu_cpu/b2b.py`). Fused where it beats the two layers (measured where a GPU is here, every point of "
             "its template timed; else its estimate scaled by how much slower an H200 ran such kernels) and it "
             "matches the unfused pair on TVM's CPU path; the total above counts the figure shown.", "",
             "| layers | count | M × K → N0 → N1 | two kernels | fused | speedup | fused in the plan |",
             "|---" * 7 + "|"]
    for f in pairs:
        shape = f.get("shape")
        dims = f"{shape['M']} × {shape['K']} → {shape['N0']} → {shape['N1']}" if shape else "—"
        unfused = fmt_seconds(sum(f["unfused_s"])) if f.get("unfused_s") else "—"
        fused = fmt_seconds(f["fused_s"]) if f.get("fused_s") else "—"
        speedup = f"{f['speedup']:.2f}×" if f.get("speedup") else "—"
        verdict = "yes" if (f["first"], f["second"]) in applied else f"no: {f.get('why', 'slower than the plan')}"
        lines.append(f"| {f['first']} → {f['second']} | {f['count']} | {dims} | {unfused} | {fused} | {speedup} | "
                     f"{verdict} |")
    return lines
