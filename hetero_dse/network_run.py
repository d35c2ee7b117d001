"""A device's whole-network figure from its plan run as one network (``CpuTarget.execute_plan``): what runs
(the plan, the plan chosen by each layer's time inside the network, every layer the library's call, or torch
eager), its latency, and in words why, where that is not the plan itself."""

from __future__ import annotations

from typing import Any

from hetero_dse.units import fmt_seconds

__all__ = ["apply_network_run"]


def apply_network_run(device: dict[str, Any], run: dict[str, Any] | None) -> None:
    """The device's latency from its plan run as one network (``run``: ``CpuTarget.execute_plan``'s figures)
    where it was: the summed kernels become a bound. What runs is the fastest of the plan and, where it was
    timed, every layer the library's call (the plan on a tie); where neither beats torch eager, eager, and the
    plan says why (then no layer calls a kernel: ``choice`` "torch eager"). A ratio against eager within the
    rounds' spread is said to be one (``noise``)."""
    if run is None or not device["complete"]:
        return
    device["summed_s"] = device["total_s"]
    device["executed"] = dict(run)
    device["torch_eager_s"] = eager = run["eager_s"]
    device["loaded"] = device["loaded"] or bool(run.get("loaded"))
    ran = [(run[f"{name}_s"], k, name) for k, name in enumerate(("plan", "context", "library"))
           if run.get(f"{name}_s")]
    seconds, _, best = min(ran)
    said = [f"the plan run as one network took {fmt_seconds(run['plan_s'])}, {run['plan_speedup']:.2f}× torch eager "
            f"({fmt_seconds(eager)})"]
    if run.get("context_s"):
        said.append(f"with each layer's faster kernel timed inside the network {fmt_seconds(run['context_s'])}, "
                    f"{run['context_speedup']:.2f}×")
    if run.get("library_s"):
        said.append(f"with every layer the library's call {fmt_seconds(run['library_s'])}, "
                    f"{run['library_speedup']:.2f}×")
    if run.get("pool") != "torch":
        said.append(f"our kernels on {run.get('pool_why', 'another pool than torch')}")
    spread = run.get("spread", 1.0)
    if seconds >= eager:
        device["run"], device["total_s"] = "torch eager", eager
        device["fallback"] = "; ".join(said) + ": run torch eager"
        # the network as torch eager runs it: no layer calls a kernel of ours or the library's with BN folded
        for e in device["layers"]:
            e["choice"] = "torch eager"
    elif best == "library":
        device["run"], device["total_s"] = "library calls", seconds
        device["fallback"] = ("; ".join(said) + ": our kernels cost more inside the network than alone; call the "
                              "library")
        for e in device["layers"]:
            e["choice"], e["chosen_s"] = "library", e["library_s"]
    elif best == "context":
        device["run"], device["total_s"] = "plan timed in the network", seconds
        device["fallback"] = ("; ".join(said) + ": a layer's kernel (the library's or one of our algorithms') is "
                              "chosen by its time inside the network, where its weights come from memory, not by "
                              "its time alone")
        for e in device["layers"]:
            e["choice"] = run["context_calls"][e["layer"]]
            e["chosen_s"] = e["ours_s"] if e["choice"] == "hetero_dse" else e["library_s"]
            module = (run.get("context_modules") or {}).get(e["layer"])
            if e["choice"] == "hetero_dse" and module and module != e["directory"]:
                # another algorithm's best, faster inside the network than the layer's own module: plan.json
                # calls it (the layer's own stays ``our_module``); its time alone is the one it was compared by
                e["called"] = {"module": module, "algorithm": run["context_algorithms"][e["layer"]],
                               "seconds": run["context_alone_s"][e["layer"]]}
                e["chosen_s"] = e["called"]["seconds"]
    else:
        device["run"], device["total_s"] = "plan", seconds
    if device["run"] in ("library calls", "plan timed in the network"):  # the layers' chosen kernels changed
        device["plan_s"] = sum((e["chosen_s"] or 0.0) * e["count"] for e in device["layers"])
    # what runs against eager, within the rounds' spread (each one's middle rounds: an outlier round is not it)
    if device["run"] != "torch eager" and seconds * spread > eager:
        device["noise"] = (f"{device['run']} at {eager / seconds:.2f}× torch eager is within the rounds' spread "
                           f"({100 * (spread - 1):.0f} %)")
    elif device["run"] == "torch eager" and eager * spread > seconds:
        device["noise"] = (f"the fastest variant at {eager / seconds:.2f}× torch eager is within the rounds' spread "
                           f"({100 * (spread - 1):.0f} %)")
    device["speedup_over_eager"] = eager / device["total_s"]
