"""Writing a network's accelerator as one Vitis HLS project: the shared kernel (``hls_templates/network/``), the
descriptor table of its layers, the weights laid out as its buffers hold them, and a test bench that runs the
whole table in one kernel call and checks every layer's output against torch.

Two kinds of run: a traced network (``model/chain.py``: every layer in execution order, each reading the last
one's output where the network does, the references torch's own), or a network's distinct layers each on
random data of its shape (``explore --model``, where only the distinct layers are known). Either way the
activations live in one DDR arena, ``[H][W][C padded to the block]`` each, and each layer's output stays there.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from cost_models.fpga_network import DESCRIPTOR_WORDS
from hetero_dse import __version__
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.resources import data_dir
from cost_models.fpga_network_design import NetworkDesign, PlacedLayer

__all__ = ["ENGINE_IDS", "FIELDS", "NetworkRun", "RunLayer", "random_run", "write_network_project"]

#: the descriptor's fields, in the table's order (``kernel.h``'s layer_t); floats stored as their bits
FIELDS = ("engine", "C", "K", "H", "W", "OH", "OW", "R", "S", "stride", "pad", "tk", "tc", "th", "tw", "in_off",
          "w_off", "bias_off", "out_off", "res_off", "lo", "hi", "slope", "shift", "res_mult", "res_shift",
          "slope_mult", "qlo", "qhi")
FLOAT_FIELDS = ("lo", "hi", "slope")
ENGINE_IDS = {"grid": 0, "depthwise": 1}
NAMES = {"grid": "grid", "depthwise": "dw"}
NETWORK_TEMPLATES = {"network/kernel.cpp.j2": "src/kernel.cpp", "network/kernel.h.j2": "src/kernel.h",
                     "network/tb.cpp.j2": "tb/tb.cpp", "network/host.cpp.j2": "host/host.cpp",
                     "network/Makefile.j2": "Makefile", "network/README.md.j2": "README.md",
                     "project.tcl.j2": "project.tcl", "hls_config.tcl.j2": "hls_config.tcl"}
#: the Vitis (v++) flow's files, for boards with an acceleration platform
PLATFORM_TEMPLATES = {"network/connectivity.cfg.j2": "connectivity.cfg", "vpp_compile.cfg.j2": "vpp_compile.cfg"}
#: copied as they are: the HLS build script, the headers' stand-ins for C-simulation without Vitis, and the
#: test double of XRT the host program is compiled against here
STATIC = {"run_hls.tcl": "run_hls.tcl", **{f"include/{h}": f"sim/include/{h}" for h in (
    "hls_stream.h", "hls_streamofblocks.h", "hls_vector.h", "xrt/xrt_device.h", "xrt/xrt_bo.h", "xrt/xrt_kernel.h")}}


@dataclass
class RunLayer:
    """One layer of the table: its design, weights and bias (torch's layout), where its input and residual come
    from (a tensor id: ``input:<name>`` or ``layer:<index>``), its activation and torch's output."""

    placed: PlacedLayer
    weight: np.ndarray
    bias: np.ndarray
    source: str
    residual: str | None
    activation: tuple[float, float, float]
    reference: np.ndarray  # [1, K, OH, OW] (a linear layer's [1, K] or [M, N])
    flatten: tuple[int, int, int] | None = None
    quant: dict[str, Any] | None = None  # int8: the epilogue's integers (``network_quant``)
    float_reference: np.ndarray | None = None  # int8: torch's float output, for the quantisation's error


@dataclass
class NetworkRun:
    name: str
    layers: list[RunLayer]
    inputs: dict[str, np.ndarray]  # the network's inputs, NCHW (a linear layer's [M, K])
    reference_source: str


def _nhwc(x: np.ndarray, block: int) -> tuple[np.ndarray, tuple[int, int, int]]:
    """A tensor as the arena holds it: [H][W][C padded to ``block``] (a matrix [M, K] as H=1, W=M)."""
    x = np.asarray(x)
    if x.ndim == 2:
        x = x.T[None, :, None, :]  # [M, K] -> [1, K, 1, M]
    c, h, w = x.shape[1:]
    out = np.zeros((h, w, -(-c // block) * block), dtype=x.dtype)
    out[:, :, :c] = x[0].transpose(1, 2, 0)
    return out, out.shape


def _im2col(x: np.ndarray, r: int, s: int, stride: int, pad: int, block: int) -> np.ndarray:
    """The network's image as a 1×1 convolution over its windows reads it: [OH][OW][C·R·S padded]."""
    c, h, w = x.shape[1:]
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    cols = np.zeros((oh, ow, c, r, s), dtype=x.dtype)
    for i in range(r):
        for j in range(s):
            cols[:, :, :, i, j] = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride].transpose(1, 2, 0)
    out = np.zeros((oh, ow, -(-c * r * s // block) * block), dtype=x.dtype)
    out[:, :, :c * r * s] = cols.reshape(oh, ow, -1)
    return out


def _weight_blocks(run: RunLayer, design: NetworkDesign) -> tuple[np.ndarray, np.ndarray]:
    """The layer's weights in the order its weight buffer holds them (a block per step) and its bias padded to
    whole tiles."""
    p, engine = run.placed, design.engines[run.placed.layer.engine]
    layer, t = p.layer, p.tiles
    w = np.asarray(run.weight)
    if p.layer.engine == "depthwise":
        n_c = -(-layer.C // t.tc)
        wp = np.zeros((n_c * t.tc, layer.R, layer.S), dtype=w.dtype)
        wp[:w.shape[0]] = w[:, 0]
        blocks = wp.reshape(n_c, t.tc // engine.out_lanes, engine.out_lanes, layer.R, layer.S).transpose(0, 1, 3, 4, 2)
        tch = t.tc
    else:
        if w.ndim == 2:  # a linear layer: [K, features] as a 1×1 convolution, features in the arena's order
            if run.flatten is not None:
                c, h, wd = run.flatten
                cp = -(-c // design.block) * design.block
                w4 = np.zeros((w.shape[0], h, wd, cp), dtype=w.dtype)
                w4[..., :c] = w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1)
                w = w4.reshape(w.shape[0], -1)
            w = w[:, :, None, None]
        if p.im2col:
            w = w.reshape(w.shape[0], -1, 1, 1)
        n_k, n_c = -(-layer.K // t.tk), -(-layer.C // t.tc)
        wp = np.zeros((n_k * t.tk, n_c * t.tc, layer.R, layer.S), dtype=w.dtype)
        wp[:w.shape[0], :w.shape[1]] = w
        kl, cl = engine.out_lanes, engine.in_lanes
        blocks = wp.reshape(n_k, t.tk // kl, kl, n_c, t.tc // cl, cl, layer.R, layer.S)
        blocks = blocks.transpose(0, 3, 1, 6, 7, 4, 2, 5)  # (kt, ct, group, r, s, channel group, lane, lane)
        tch = t.tk
    # the epilogue's parameters, a tile's in one burst: its biases (int8: then its requantising multipliers)
    n_o = -(-layer.K // tch)
    integer = run.quant is not None
    rows = [run.bias] + ([run.quant["mult"]] if integer else [])
    params = np.zeros((n_o, len(rows), tch), dtype=np.int32 if integer else np.float32)
    for j, row in enumerate(rows):
        padded_row = np.zeros(n_o * tch, dtype=params.dtype)
        padded_row[:len(row)] = row
        params[:, j, :] = padded_row.reshape(n_o, tch)
    return blocks.ravel(), params.ravel()


def _float_bits(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.int32)[0])


def lay_out(run: NetworkRun, design: NetworkDesign) -> dict[str, Any]:
    """The arena (inputs placed, every layer's output region zero), the arena the run must leave (each layer's
    region holding torch's output), the weights and the descriptor table."""
    block, word = design.block, design.word
    regions: dict[str, tuple[int, np.ndarray]] = {}  # tensor id -> (word offset, its array as laid out)
    arena_words = 0

    def place(tid: str, array: np.ndarray) -> int:
        nonlocal arena_words
        regions[tid] = (arena_words, array)
        arena_words += array.size // word
        return regions[tid][0]

    for name, x in run.inputs.items():
        place(f"input:{name}", _nhwc(x, block)[0])
    weights: list[np.ndarray] = []
    params: list[np.ndarray] = []
    weight_words = param_words = 0
    table = np.zeros((len(run.layers), DESCRIPTOR_WORDS), dtype=np.int32)
    for i, r in enumerate(run.layers):
        layer, t = r.placed.layer, r.placed.tiles
        src = r.source
        if r.placed.im2col:
            x = run.inputs[src.split(":", 1)[1]]
            s = r.placed.shape
            src = f"im2col:{i}"
            place(src, _im2col(x, s.R, s.S, s.stride, s.pad, block))
        blocks, bias = _weight_blocks(r, design)
        w_off, weight_words = weight_words, weight_words + blocks.size // design.wword
        b_off, param_words = param_words, param_words + bias.size // design.pword
        weights.append(blocks)
        params.append(bias)
        expected = _nhwc(r.reference, block)[0]
        out_off = place(f"layer:{i}", expected)
        values = {"engine": ENGINE_IDS[layer.engine], "C": layer.C, "K": layer.K, "H": layer.H, "W": layer.W,
                  "OH": layer.OH, "OW": layer.OW, "R": layer.R, "S": layer.S, "stride": layer.stride,
                  "pad": layer.pad, "tk": t.tk, "tc": t.tc, "th": t.th, "tw": t.tw, "in_off": regions[src][0],
                  "w_off": w_off, "bias_off": b_off, "out_off": out_off,
                  "res_off": regions[r.residual][0] if r.residual else -1}
        lo, hi, slope = r.activation
        values.update(lo=_float_bits(lo), hi=_float_bits(hi), slope=_float_bits(slope))
        q = r.quant or {}
        values.update({k: int(q.get(k, 0)) for k in ("shift", "res_mult", "res_shift", "slope_mult", "qlo", "qhi")})
        table[i, :len(FIELDS)] = [values[f] for f in FIELDS]
        if expected.size != layer.OH * layer.OW * layer.K:
            raise HeteroDSEError(f"layer {i} ({r.placed.shape.name}): torch's output has {expected.size} elements "
                                 f"as laid out, the kernel writes {layer.OH * layer.OW * layer.K} (a bug: please "
                                 "report it)")
    dtype = np.int8 if design.dtype == "int8" else np.float32
    arena = np.zeros(arena_words * word, dtype=dtype)
    done = arena.copy()
    for tid, (off, array) in regions.items():
        done[off * word: off * word + array.size] = array.ravel()
        if not tid.startswith("layer:"):
            arena[off * word: off * word + array.size] = array.ravel()
    return {"arena": arena, "expected": done, "weights": np.concatenate(weights).astype(dtype), "table": table,
            "params": np.concatenate(params), "arena_words": arena_words, "weight_words": weight_words,
            "param_words": param_words}


def random_run(design: NetworkDesign, ops: Sequence[Any], seed: int = 0) -> NetworkRun:
    """Each distinct layer of ``design`` on random data of its shape (its input, weights and a residual where
    its epilogue adds one), torch's output of it as the reference."""
    import torch

    rng = np.random.default_rng(seed)
    layers, inputs = [], {}
    for i, (p, op) in enumerate(zip(design.layers, ops, strict=True)):
        s = p.shape
        red = s.C * s.R * s.S if s.engine == "grid" else s.R * s.S
        if op.name == "gemm":
            x = rng.uniform(-1, 1, (s.W, s.C)).astype(np.float32)
        else:
            x = rng.uniform(-1, 1, (1, s.C, s.H, s.W)).astype(np.float32)
        shape = (s.K, s.C, s.R, s.S) if s.engine == "grid" else (s.C, 1, s.R, s.S)
        w = (rng.uniform(-1, 1, shape) / np.sqrt(red)).astype(np.float32)
        b = rng.uniform(-1, 1, s.K if s.engine == "grid" else s.C).astype(np.float32)
        if op.name == "gemm":
            ref = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w[:, :, 0, 0]), torch.from_numpy(b))
            w = w[:, :, 0, 0]
        else:
            ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s.stride,
                                             s.pad, groups=1 if s.engine == "grid" else s.C)
        inputs[f"x{i}"] = x
        residual = None
        steps = [st.split("(")[0] for st in op.epilogue]
        if "add" in steps:
            res = rng.uniform(-1, 1, tuple(ref.shape)).astype(np.float32)
            inputs[f"r{i}"] = res
            residual = f"input:r{i}"
            ref = ref + torch.from_numpy(res)
        activation = _activation_of(op.epilogue)
        lo, hi, slope = activation
        ref = torch.where(ref < 0, ref * slope, ref).clamp(lo, hi)
        layers.append(RunLayer(p, w, b, f"input:x{i}", residual, activation, ref.numpy()))
    run = NetworkRun(design_name(design), layers, inputs, "torch.nn.functional on random data, layer by layer")
    return quantized(run, design)


def quantized(run: NetworkRun, design: NetworkDesign) -> NetworkRun:
    """``run`` as the design's data type runs it (int8: ``network_quant``)."""
    from hetero_dse.hls.network_quant import quantize_run

    return quantize_run(run) if design.dtype == "int8" else run


def design_name(design: NetworkDesign) -> str:
    return (design.layers[0].shape.name.split(":")[0] if design.layers else "network") or "network"


def _activation_of(steps: Sequence[str]) -> tuple[float, float, float]:
    from hetero_dse.epilogue import parse_step

    inf = float("inf")
    for step in steps:
        kind, args = parse_step(step)
        if kind == "relu":
            return (-inf, inf, 0.0)
        if kind == "relu6":
            return (0.0, 6.0, 0.0)
        if kind == "leaky_relu":
            return (-inf, inf, args[0] if args else 0.01)
        if kind == "clip":
            return (args[0], args[1], 1.0)
    return (-inf, inf, 1.0)


def _environment() -> Environment:
    return Environment(loader=FileSystemLoader(str(data_dir("hls_templates"))), undefined=StrictUndefined,
                       keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def context(design: NetworkDesign, run: NetworkRun, data: dict[str, Any], top: str) -> dict[str, Any]:
    from cost_models.fpga_costs import ARITHMETIC
    from cost_models.fpga_network import network_trips

    from cost_models.fpga_network_design import engine_storage

    a = ARITHMETIC[design.dtype]
    integer = design.dtype == "int8"
    board = design.board
    engines = []
    for kind, e in design.engines.items():
        engines.append({"kind": kind, "name": NAMES[kind], "id": ENGINE_IDS[kind], "lanes": e.out_lanes,
                        "in_lanes": e.in_lanes, "in_rows": e.in_rows, "w_rows": e.w_rows, "out_rows": e.out_rows,
                        "tree_depth": (e.in_lanes - 1).bit_length(), "packed": e.packed,
                        "storage": engine_storage(e, design.dtype, board.cap("uram") > 0)})
    tch = max(p.tiles.tk if p.layer.engine == "grid" else p.tiles.tc for p in design.layers)
    elements = data["arena"].size + data["weights"].size
    ports = [{"name": "table", "bundle": "gmem_table", "depth": data["table"].size},
             {"name": "act_in", "bundle": "gmem0", "depth": data["arena_words"]},
             {"name": "act_res", "bundle": "gmem1", "depth": data["arena_words"]},
             {"name": "act_out", "bundle": "gmem2", "depth": data["arena_words"]},
             {"name": "wgt", "bundle": "gmem3", "depth": data["weight_words"]},
             {"name": "params", "bundle": "gmem4", "depth": data["param_words"]}]
    atol, rtol = [], []
    for r in run.layers:  # int8: exact, the reference being the same integer arithmetic
        red = r.placed.layer.C * r.placed.layer.R * r.placed.layer.S
        scale = max(1.0, float(np.abs(r.reference).max()) if r.reference.size else 1.0)
        atol.append("0.0" if integer else repr(1e-5 * scale * max(1.0, red) ** 0.5))
        rtol.append("0.0" if integer else repr(1e-4))
    from cost_models.fpga_costs import AXI_MAX_BURST_BYTES, AXI_OUTSTANDING

    port_bits = design.word * (8 if integer else 32)
    build = {"version": __version__, "dtype": design.dtype, "achieved_mhz": f"{design.achieved_mhz:.0f}",
             "model_ms": f"{1e3 * design.latency_s:.3f}", "platform": board.platform,
             "clock_period_ns": round(1000.0 / design.clock_mhz, 3),
             "flow_target": "vitis" if board.platform else "vivado",
             "export_format": "xo" if board.platform else "ip_catalog",
             "axi": {"max_burst_beats": AXI_MAX_BURST_BYTES // (board.memory.port_bits // 8),
                     "outstanding": AXI_OUTSTANDING},
             "memory_channels": board.memory.channels, "connectivity": board.memory.connectivity or "DDR",
             "host_atol": "0.0" if integer else "1e-3", "host_rtol": "0.0" if integer else "1e-3"}
    return {**build, "top": top, "network": run.name, "layers": len(run.layers), "board": design.board.name,
            "part": design.board.part, "clock_mhz": design.clock_mhz, "integer": integer,
            "ctype": "signed char" if integer else "float", "acc_ctype": "int" if integer else "float",
            "params": 2 if integer else 1, "param_words": data["param_words"],
            "word": design.word, "wword": design.wword, "pword": design.pword,
            "port_bits": board.memory.port_bits, "act_bits": port_bits, "block": design.block,
            "descriptor_words": DESCRIPTOR_WORDS, "descriptor_fields": FIELDS, "float_fields": FLOAT_FIELDS,
            "engine_ids": list(ENGINE_IDS), "max_layers": len(run.layers), "engines": engines, "tch_max": tch,
            "distance": next(iter(design.engines.values())).distance, "ports": ports,
            "ops": {"mul": a.mul_core[0], "mul_impl": a.mul_core[1], "add": a.add_core[0],
                    "add_impl": a.add_core[1]},
            "arena_words": data["arena_words"], "weight_words": data["weight_words"], "atol": atol, "rtol": rtol,
            "reference_source": run.reference_source, "elements": elements,
            "trips": [network_trips(design.engines[r.placed.layer.engine], r.placed.layer, r.placed.tiles)
                      for r in run.layers]}


#: test data past this is not written (as for one layer's project: ``project.MAX_TESTBENCH_BYTES``)
MAX_DATA_BYTES = 10**9
#: a C-simulation runs a layer's processes one after the other, so every block its read processes make is held
#: at once; past this the C-simulation is refused in one sentence instead of exhausting the machine
MAX_CSIM_BYTES = 4 * 2**30


def csim_bytes(design: NetworkDesign) -> int:
    """The most memory the C-simulation of one layer holds in its streams of blocks."""
    from cost_models.fpga_network import network_trips

    worst, elem = 0, 1 if design.dtype == "int8" else 4
    for p in design.layers:
        e = design.engines[p.layer.engine]
        t = network_trips(e, p.layer, p.tiles)
        lanes_in = e.in_lanes if e.kind == "grid" else e.out_lanes
        weights = e.w_rows * e.out_lanes * (e.in_lanes if e.kind == "grid" else 1)
        held = elem * t["steps"] * (e.in_rows * lanes_in + weights) + 4 * t["out_tiles"] * e.out_rows * e.out_lanes
        worst = max(worst, int(held))
    return worst


def write_network_project(directory: Path, design: NetworkDesign, run: NetworkRun, top: str = "network_kernel"
                          ) -> Path:
    """Render ``design`` with the layers of ``run`` into ``directory`` (replacing it, published at once); raises
    :class:`TestBenchTooLarge` before laying out data past ``MAX_DATA_BYTES``."""
    from hetero_dse.hls.project import TestBenchTooLarge
    from hetero_dse.units import fmt_bytes

    size = sum(r.weight.nbytes + 2 * r.reference.nbytes for r in run.layers) + sum(
        x.nbytes for x in run.inputs.values())
    if size > MAX_DATA_BYTES:
        raise TestBenchTooLarge(f"its test bench would hold {fmt_bytes(size)} of weights and activations (limit "
                                f"{fmt_bytes(MAX_DATA_BYTES)})")
    data = lay_out(run, design)
    ctx = context(design, run, data, top)
    directory = Path(directory)
    try:
        with atomic_directory(directory) as partial:
            env = _environment()
            templates = {**NETWORK_TEMPLATES, **(PLATFORM_TEMPLATES if design.board.platform else {})}
            for template, target in templates.items():
                path = partial / target
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(env.get_template(template).render(**ctx))
            for source, target in STATIC.items():
                (partial / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(data_dir("hls_templates") / source, partial / target)
            (partial / "data").mkdir()
            data["table"].tofile(partial / "data" / "table.bin")
            data["arena"].tofile(partial / "data" / "arena.bin")
            data["expected"].tofile(partial / "data" / "expected.bin")
            data["weights"].tofile(partial / "data" / "weights.bin")
            data["params"].tofile(partial / "data" / "params.bin")
            macs = sum(r.placed.layer.macs for r in run.layers)
            record = {"network": run.name, "board": design.board.name, "part": design.board.part, "top": top,
                      "generator": f"hetero_dse {__version__}", "design": design.to_json(),
                      "table": [dict(zip(FIELDS, (int(v) for v in row), strict=False)) for row in data["table"]],
                      "trips": ctx["trips"], "predicted": {"ops": 2 * macs}, "csim_bytes": csim_bytes(design),
                      "ports": ctx["ports"]}
            (partial / "design.json").write_text(json.dumps(record, indent=2, default=float) + "\n")
    except OSError as exc:
        raise HeteroDSEError(f"cannot write the network project to {directory}: {exc.strerror or exc}") from exc
    return directory


def check_trips(directory: Path, output: str) -> list[str]:
    """Where the C-simulation's trip counts (``output``, the test bench's) differ from the model's in the
    project's design.json: one line each (none: the code runs the loops the model charges)."""
    import re

    record = json.loads((Path(directory) / "design.json").read_text())
    ran = {int(m.group(1)): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
           for m in re.finditer(r"layer (\d+) trips (.*)", output)}
    problems = []
    for i, model in enumerate(record["trips"]):
        got = ran.get(i)
        if got is None:
            problems.append(f"layer {i}: the C-simulation printed no trip counts")
            continue
        for kind in ("read_in", "read_w", "compute", "write", "bias"):
            if got.get(kind) != model[kind]:
                problems.append(f"layer {i}: {kind} ran {got.get(kind)} iterations, the model charges {model[kind]}")
    return problems
