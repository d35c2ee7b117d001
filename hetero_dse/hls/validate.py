"""Predicted against synthesized: every figure ``design.json`` promised, beside what Vitis reported.

Latency (cycles, and time at the clock achieved), the compute II, the trip count and II of every labelled
loop, DSP/BRAM18K/URAM/LUT/FF, Fmax, the m_axi data width of every port and the operator cores
instantiated — each with its relative error, and where they part, the likely cause read from the log and
the RTL ("compute II 4, predicted 1: limited memory ports on buf0_pad").
"""

from __future__ import annotations

from typing import Any

__all__ = ["find_loop", "module_report", "process_modules", "validate", "worst_error"]

RESOURCES = ("dsp", "bram18k", "uram", "lut", "ff")


def _row(figure: str, predicted: float | None, reported: float | None, cause: str | None = None,
         exact: bool = False, missing: bool = False) -> dict[str, Any]:
    error = None
    if predicted is not None and reported is not None:
        error = (reported - predicted) / predicted if predicted else (0.0 if reported == predicted else None)
    row = {"figure": figure, "predicted": predicted, "reported": reported, "error": error}
    if exact:
        row["exact"] = True  # a figure the code fixes: any difference is a mismatch, whatever its size
    if missing:
        # a figure the report must have and does not: never a pass (a loop Vitis renamed or merged, a loop
        # in a module the reader did not find)
        row["missing"] = True
        row["cause"] = cause or "not in the report"
    elif cause and error not in (None, 0.0):
        row["cause"] = cause
    return row


def process_modules(report: dict[str, Any], process: str) -> list[dict[str, Any]]:
    """The module reports of one of our processes: its own (Vitis may prefix the top's name) and those Vitis
    2022 and later make of its pipelined loops (``<process>_Pipeline_<labels>``)."""
    found = []
    for name, module in (report.get("modules") or {}).items():
        base = name.split("_Pipeline_")[0]
        if base == process or base.endswith(f"_{process}"):
            found.append(module)
    return found


def module_report(report: dict[str, Any], process: str) -> dict[str, Any] | None:
    """The module report of one of our processes, with the loops of its ``_Pipeline_`` modules in it."""
    modules = process_modules(report, process)
    if not modules:
        return None
    return {**modules[0], "loops": [lp for m in modules for lp in (m.get("loops") or [])]}


def _loops(loops: list[dict[str, Any]]):
    for lp in loops:
        yield lp
        yield from _loops(lp.get("children") or [])


def find_loop(module: dict[str, Any] | None, labels: list[str]) -> dict[str, Any] | None:
    """The reported loop of a labelled nest: Vitis flattens a perfect nest into one loop named after its
    labels joined by ``_``; otherwise the innermost label's loop."""
    if module is None or not labels:
        return None
    found = list(_loops(module.get("loops") or []))
    joined = "_".join(labels)
    for lp in found:
        if lp["name"] == joined:
            return lp
    for lp in found:
        if lp["name"].split(".")[0] == labels[-1] or lp["name"].endswith(f"_{labels[-1]}"):
            return lp
    return None


def _banks(row: dict[str, str]) -> int:
    """The banks of one bind-storage row: the last number of its "Bitwidth, Depth, Banks" cell (1 where the
    report has none: a row per bank)."""
    cell = next((v for k, v in row.items() if "Banks" in k), "")
    numbers = [int(x) for x in cell.replace(",", " ").split() if x.isdigit()]
    return numbers[-1] if len(numbers) >= 3 else 1


def validate(record: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """``validation.json`` of one project: ``record`` is its ``design.json``, ``result`` its synthesis
    result (``synth.json``)."""
    predicted = record["predicted"]
    expected = record.get("expectations") or {}
    report = result.get("report") or {}
    clock_mhz = float(record["knobs"]["clock_mhz"])
    # the clock the model's seconds are at: the target, derated where the model expects the design not to close
    achieved_mhz = float((predicted.get("clock") or {}).get("achieved_mhz") or clock_mhz)
    log = result.get("log") or {}
    rows = []

    # latency: co-simulation's measurement where it ran, else the synthesis estimate
    cycles = predicted["latency_s"] * achieved_mhz * 1e6 if predicted.get("latency_s") else None
    cosim_status = (result.get("cosim") or {}).get("status")
    cosim = (result.get("cosim") or {}).get("latency_cycles") or {}
    reported_cycles = cosim.get("max") or (report.get("latency_cycles") or {}).get("worst")
    latency_row = _row("latency (cycles)" + (", co-simulated" if cosim.get("max") else ""), cycles, reported_cycles)
    if str(predicted.get("bound", "")).startswith("ddr channel"):
        # the model's time is the channel's bandwidth, which neither csynth nor co-simulation's memory limits
        latency_row.update(informative=True, cause="bound by a DDR channel's bandwidth, which csynth and "
                                                   "co-simulation do not model: only the hardware can check it")
    rows.append(latency_row)
    if cosim_status is not None and cosim_status.lower() != "pass":
        rows.append({"figure": "co-simulation", "predicted": "Pass", "reported": cosim_status, "error": None,
                     "failed": True, "cause": "the RTL computes a different output than the C++ (a dependence the "
                                              "pragmas declared that the code breaks?)"})
    impl = result.get("impl") or {}
    achieved_ns = impl.get("achieved_clock_ns") or report.get("estimated_clock_ns")
    if reported_cycles is not None and impl.get("achieved_clock_ns"):
        rows.append(_row("latency (s, at the clock achieved)", predicted.get("latency_s"),
                         reported_cycles * impl["achieved_clock_ns"] * 1e-9))
    if impl.get("achieved_clock_ns"):
        rows.append(_row("Fmax (MHz, post-route)", achieved_mhz, 1000.0 / impl["achieved_clock_ns"],
                         "the clock place and route closed at is not the one the model derated the target to"))
    else:
        # csynth's estimate knows nothing of routing (fan-out, SLR crossings): shown, not held to the model
        rows.append({"figure": "Fmax (MHz, csynth's estimate)", "predicted": achieved_mhz,
                     "reported": 1000.0 / achieved_ns if achieved_ns else None, "error": None,
                     "cause": "before place and route; run the impl step to check the model's Fmax"})

    # loops: the compute's II first, then every labelled loop's trip count and II
    limits = {(p["module"], p["loop"]): p["array"] for p in log.get("port_limits", [])}
    carried = {(p["module"], p["loop"]): p["array"] for p in log.get("carried", [])}
    for loop in expected.get("loops", []):
        if not loop["labels"]:
            continue  # a process of one iteration: no loop to match
        process = loop["process"]
        module = module_report(report, process)
        found = find_loop(module, loop["labels"])
        name = f"{process}:{'/'.join(loop['labels']) or 'body'}"
        cause = None
        if found is not None and found.get("ii") is not None and found["ii"] != loop["ii"]:
            array = next((a for (m, lp), a in limits.items() if m.split("_Pipeline_")[0].endswith(process)
                          and lp == found["name"]), None)
            recurring = next((a for (m, lp), a in carried.items() if m.split("_Pipeline_")[0].endswith(process)
                              and lp == found["name"]), None)
            if array:
                cause = f"II {found['ii']}, predicted {loop['ii']}: limited memory ports on {array}"
            elif recurring:
                cause = (f"II {found['ii']}, predicted {loop['ii']}: a carried dependence on {recurring} is longer "
                         "than the model's recurrence")
            else:
                cause = (f"II {found['ii']}, predicted {loop['ii']}: see the log's pipelining result for "
                         f"{found['name']}")
        if found is None and module is not None and loop["labels"]:
            cause = "no loop of this name in the report (renamed or merged by Vitis)"
        if found is None and module is None:
            cause = f"no module of {process} in the report"
        figure = "compute II" if process == "compute_tile" else f"{name} II"
        rows.append(_row(figure, loop["ii"], found.get("ii") if found else None, cause, exact=True,
                         missing=found is None or found.get("ii") is None))
        rows.append(_row(f"{name} trip count", loop["trip_count"], found.get("trip_count") if found else None,
                         "the loop runs a different number of iterations than the model's plan", exact=True,
                         missing=found is None))

    # resources: post-route where the flow ran it, else the synthesis estimate
    post = impl.get("resources") or {}
    for key in RESOURCES:
        value = post.get(key) if post.get(key) is not None else (report.get("resources") or {}).get(key)
        rows.append(_row(f"{key.upper()}" + (" (post-route)" if post.get(key) is not None else ""),
                         (predicted.get("resources") or {}).get(key), value))

    # buffers: the banks Vitis made of each on-chip buffer (csynth.rpt's bind storage table), which says
    # whether the ARRAY_PARTITION pragmas on the stream_of_blocks channels applied to their blocks
    storage = (result.get("bind") or {}).get("storage") or []
    if storage:
        for buf in expected.get("buffers", []):
            if buf["storage"] == "registers":
                continue  # registers are not memories: the storage table does not list them
            matched = [row for row in storage if (row.get("Variable") or "").startswith(buf["variable"])]
            banks = sum(_banks(row) for row in matched) if matched else None
            rows.append(_row(f"{buf['variable']} banks", buf["banks"], banks,
                             f"Vitis made {banks} bank{'s' if banks != 1 else ''} of {buf['variable']}, the "
                             f"design partitions it into {buf['banks']}: the partition did not apply to its "
                             "blocks as the model assumes", exact=True))

    # ports and operator cores: the RTL is the definitive word
    rtl = result.get("rtl") or {}
    bundles = expected.get("port_bundles") or {}
    widths = rtl.get("port_bits") or report.get("port_bits") or {}
    for port, bits in (expected.get("port_bits") or {}).items():
        got = widths.get(bundles.get(port, port))
        rows.append(_row(f"m_axi {port} (bits)", bits, got,
                         f"m_axi {port} is {got} bits, the model assumed {bits}", exact=True))
    cores = rtl.get("cores") or {}
    if rtl:
        for op, count in (expected.get("instances") or {}).items():
            got = cores.get(op, 0)
            rows.append(_row(f"{op} cores", count, got,
                             f"Vitis instantiated {got} {op} cores, the model charges {count}", exact=True))
    return {"design": record.get("signature"), "knobs": record.get("knobs"), "tool_version":
            result.get("tool_version"), "status": result.get("status"), "figures": rows}


def worst_error(validation: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """The figures past ``threshold`` (relative), every exact figure that differs at all, every figure the
    report should have and does not, and a failed co-simulation."""
    out = []
    for row in validation["figures"]:
        if row.get("informative"):
            continue  # shown, not comparable (a DDR-bound latency)
        if row.get("missing") or row.get("failed"):
            out.append(row)  # a figure that must be there and is not, or a co-simulation that failed
            continue
        err = row.get("error")
        if err is None:
            continue
        if abs(err) > threshold or (row.get("exact") and err != 0):
            out.append(row)
    return out
