"""TEST DOUBLE's design: the modules a Vitis-like tool would make of a hetero_dse kernel (a DATAFLOW top,
its processes, a ``<function>_Pipeline_<labels>`` module for each pipelined loop nest that is not the whole
body of its function, the PE instantiated a lane), each scheduled by ``hls_schedule``, and the DATAFLOW
region run block by block: every process walks its tile loops, takes and frees blocks of its channels
(``hls::read_lock``/``write_lock``: a producer waits for a free block of the channel's depth, a consumer for
a full one) and spends its pipelines' latencies. The design's latency is when the last process ends."""

from __future__ import annotations

import re
from math import ceil
from pathlib import Path
from typing import Any

from hls_schedule import Design, Module, Scheduler

from hetero_dse.hls.cparse import CFunction
from hetero_dse.hls.ctree import Node
from hetero_dse.hls.cvalues import NotAffine, c_affine


def build(project: Path) -> Design:
    s = Scheduler(project)
    modules: dict[str, Module] = {}
    latency_of: dict[int, int] = {}  # id(outermost loop of a pipelined nest) -> its latency
    processes = [n.name for n in s.k.functions[s.top].body.walk() if n.kind == "CALL_EXPR"
                 and n.name in s.k.functions]
    modules[s.top] = Module(s.top, s.top, children={p: 1 for p in processes})
    todo = list(processes)
    while todo:
        name = todo.pop(0)
        if name in modules:
            continue
        fn = s.k.functions[name]
        module = Module(name, name)
        modules[name] = module
        if fn.pragma("PIPELINE") is not None:  # a pipelined function: the PE
            it = s.iteration(fn, fn.body, set())
            module.cores = [core for core, times in it["cores"] for _ in range(times)]
            module.latency = it["depth"]
            module.lut += _mux_luts(s, fn, it)
            continue
        for lp in [x for x in fn.loops if x.has("PIPELINE")]:
            sched, it, nest = s.pipeline(fn, lp)
            latency_of[id(nest[0].node)] = sched.latency
            whole = _whole_body(fn, nest[0].node)
            owner = module if whole else Module(f"{name}_Pipeline_{sched.name}", name, latency=sched.latency)
            owner.loops.append(sched)
            owner.cores += [core for core, times in it["cores"] for _ in range(times)]
            owner.lut += _mux_luts(s, fn, it)
            for callee, times in it["calls"].items():
                owner.children[callee] = owner.children.get(callee, 0) + times
                todo.append(callee)
            if not whole:
                modules[owner.name] = owner
                module.children[owner.name] = 1
            s.log.append(f"INFO: [HLS 200-1470] Pipelining result : Target II = {sched.target_ii}, Final II = "
                         f"{sched.ii}, Depth = {sched.depth}, loop '{sched.name}'")
            s.log.extend(sched.violations)
        inside = {id(x) for lp in fn.loops if lp.has("PIPELINE") for x in lp.body.walk()}
        for n in fn.body.walk():  # calls outside any pipeline: one instance each
            if n.kind == "CALL_EXPR" and n.name in s.k.functions and id(n) not in inside:
                module.children[n.name] = module.children.get(n.name, 0) + 1
                todo.append(n.name)
    for name, module in modules.items():
        if module.name == name and module.function in s.k.functions and not module.latency:
            module.latency = sum(sched.latency for sched in module.loops) + 2
    latency = _run_dataflow(s, processes, modules, latency_of)
    return Design(s.top, s.part, s.clock_ns, modules, s.memories(), s.ports, latency, s.unsafe, s.log)


def _whole_body(fn: CFunction, loop: Node) -> bool:
    """Whether ``loop`` is all its function does (then Vitis keeps it in the function's own module)."""
    stmts = [c for c in fn.body.children if c.kind != "DECL_STMT"]
    return len(stmts) == 1 and (stmts[0] is loop or loop in stmts[0].children) and len(fn.body.children) == 1


def _mux_luts(s: Scheduler, fn: CFunction, it: dict[str, Any]) -> int:
    """The multiplexers of accesses whose bank the pipeline picks at run time: a read selects among the banks
    (a LUT6 is a 4:1 multiplexer a bit), a write enables one of them (a LUT a bank)."""
    luts = 0
    for a in it["accesses"]:
        mem = s._array(fn, a["array"])
        if mem is None or mem["registers"]:
            continue
        choices = 1
        for d, ix in enumerate(a["index"]):
            n = mem["dims"][d] if d < len(mem["dims"]) else 1
            banks = _banks(mem, d + 1, n)
            try:
                form = c_affine(ix, fn.defs)
            except NotAffine:
                choices *= banks
                continue
            if any(v and v not in a["env"] and c % banks for v, c in form.items()):
                choices *= banks
        if choices > 1:
            bits = s.channels.get(mem["name"], {}).get("bits", 32)
            luts += a["times"] * (choices if a["write"] else ceil(choices / 4) * bits)
    return luts


def _banks(mem: dict[str, Any], dim: int, n: int) -> int:
    for d, kind, factor in mem["partition"]:
        if d == dim:
            return n if kind == "complete" else max(1, min(factor, n))
    return 1


# ------------------------------------------------------------------------------------- the DATAFLOW
def _events(s: Scheduler, fn: CFunction, latency_of: dict[int, int], modules: dict[str, Module]):
    """What one process does, in order: ("busy", cycles), ("take"/"give", channel, "read"|"write")."""

    def lock(n: Node) -> tuple[str, str] | None:
        if n.kind != "VAR_DECL":
            return None
        m = re.match(r"hls::(read|write)_lock<", n.type)
        if not m:
            return None
        channel = s.aliases.get((fn.name, n.name))
        return (channel, m.group(1)) if channel else None

    def run(n: Node, env: dict[str, int]):
        if n.kind == "FOR_STMT":
            if id(n) in latency_of:
                yield ("busy", latency_of[id(n)])
                return
            lp = next(x for x in fn.loops if x.node is n)
            for v in lp.values(env, fn.defs):
                yield ("busy", 1)  # the loop's own control
                yield from run(lp.body, {**env, lp.var: v})
            return
        if n.kind == "COMPOUND_STMT":
            held = []
            for c in n.children:
                decl = c.children[0] if c.kind == "DECL_STMT" and c.children else c
                got = lock(decl)
                if got:
                    yield ("take", *got)
                    held.append(got)
                    continue
                yield from run(c, env)
            for got in reversed(held):
                yield ("give", *got)
            return
        if n.kind == "CALL_EXPR" and n.name in s.k.functions:
            yield ("busy", modules[n.name].latency + 1)
            return
        for c in n.children:
            yield from run(c, env)

    return run(fn.body, {})


def _run_dataflow(s: Scheduler, processes: list[str], modules: dict[str, Module],
                  latency_of: dict[int, int]) -> int:
    given: dict[tuple[str, str], list[int]] = {}  # (channel, "write"): when each block was filled ...
    taken: dict[tuple[str, str], int] = {}
    state = []
    for name in processes:
        gen = _events(s, s.k.functions[name], latency_of, modules)
        state.append({"name": name, "gen": gen, "t": 0, "next": next(gen, None)})
    while any(p["next"] is not None for p in state):
        progressed = False
        for p in state:
            while p["next"] is not None:
                ev = p["next"]
                if ev[0] == "busy":
                    p["t"] += ev[1]
                elif ev[0] == "take":
                    _, channel, kind = ev
                    k = taken.get((channel, kind), 0)
                    if kind == "read":
                        filled = given.get((channel, "write"), [])
                        if k >= len(filled):
                            break  # the producer has not filled it yet
                        p["t"] = max(p["t"], filled[k])
                    else:
                        freed = given.get((channel, "read"), [])
                        depth = s.channels[channel]["blocks"]
                        if k >= depth:
                            if k - depth >= len(freed):
                                break  # every block is still in use
                            p["t"] = max(p["t"], freed[k - depth])
                    taken[(channel, kind)] = k + 1
                else:
                    _, channel, kind = ev
                    given.setdefault((channel, kind), []).append(p["t"])
                p["next"] = next(p["gen"], None)
                progressed = True
        if not progressed:
            raise RuntimeError("the DATAFLOW processes deadlock: a consumer waits for a block no producer fills")
    return max(p["t"] for p in state) + 2
