"""Writing a layer-pipelined accelerator (``cost_models/fpga_pipeline.py``) as a Vitis HLS project: one stage a
layer of a traced network (``model/chain.py``), each with its lanes from the design and its weights on chip
(``src/weights.h``), FIFOs of words between the stages (a fold of the producer's output lanes; a regroup where
the consumer reads other lanes), and a test bench that streams images through the
whole pipeline in one kernel call and checks the network's output against torch (int8: bit for bit against
the same integer arithmetic, ``network_quant``).

A tensor's pixel is padded with zeros to a multiple of every lane count that touches it (its producer's output
lanes, each consumer's input lanes), so every stage reads and writes whole words with no condition.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from cost_models.fpga_costs import ARITHMETIC, axi_max_beats, packed_chain
from cost_models.fpga_pipeline import (
    PipelineDesign,
    io_trips,
    load_trips,
    pointwise,
    port_pixel,
    stage_cycles,
    stream_trips,
    window_trips,
)
from cost_models.fpga_pipeline_slrs import Kernel
from cost_models.fpga_pipeline_storage import line_reads, line_rows
from cost_models.fpga_pipeline_streams import in_lanes_of, regroups
from hetero_dse import __version__
from hetero_dse.atomic import atomic_directory
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hls.pipeline_weights import c_float, lowest, params_header, weight_rows
from hetero_dse.resources import data_dir

__all__ = ["check_pipeline_trips", "write_pipeline_project"]

TEMPLATES = {"pipeline/kernel.cpp.j2": "src/kernel.cpp", "pipeline/kernel.h.j2": "src/kernel.h",
             "pipeline/tb.cpp.j2": "tb/tb.cpp", "pipeline/host.cpp.j2": "host/host.cpp",
             "pipeline/Makefile.j2": "Makefile", "pipeline/README.md.j2": "README.md", "project.tcl.j2": "project.tcl",
             "hls_config.tcl.j2": "hls_config.tcl"}
#: the Vitis (v++) flow's files, for boards with an acceleration platform
PLATFORM_TEMPLATES = {"pipeline/connectivity.cfg.j2": "connectivity.cfg", "vpp_compile.cfg.j2": "vpp_compile.cfg"}
#: copied as they are: the HLS build script, the headers' stand-ins for C-simulation without Vitis, and the
#: test double of XRT the host program is compiled against here
STATIC = {"run_hls.tcl": "run_hls.tcl", **{f"include/{h}": f"sim/include/{h}" for h in (
    "hls_stream.h", "hls_vector.h", "xrt/xrt_device.h", "xrt/xrt_bo.h", "xrt/xrt_kernel.h")}}
def _im2col(x: np.ndarray, R: int, S: int, stride: int, pad: int) -> np.ndarray:
    """``x`` [1, C, H, W] as [OH·OW, R·S·C], channel (r·S + s)·C + c, zeros over the padding."""
    _, c, h, w = x.shape
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - R) // stride + 1, (w + 2 * pad - S) // stride + 1
    cols = np.stack([xp[:, r:r + stride * oh:stride, s:s + stride * ow:stride] for r in range(R) for s in range(S)])
    return cols.transpose(2, 3, 0, 1).reshape(oh * ow, R * S * c)


def _plan(design: PipelineDesign, layers: Sequence[Any]) -> tuple[list[dict], list[dict], list[dict]]:
    """The tensors (0: the image, i + 1: stage i's output) with their padded channels, their producer's word and
    their consumers' FIFOs; the stages' template values; the regroups between words of other lanes, for the
    traced graph (its residuals' true sources)."""
    stages = design.stages
    port_elems = design.board.memory.port_bits // (8 * np.dtype(design.dtype).itemsize)
    elem_bits = 8 * np.dtype(design.dtype).itemsize
    lanes_in = [in_lanes_of(s.layer, s.in_lanes, s.out_lanes) for s in stages]
    tensors = [{"index": 0, "name": "img", "what": "the image", "lanes": [], "true": stages[0].layer.C,
                "pixels": stages[0].layer.H * stages[0].layer.W, "consumers": [], "word_type": "img_word_t"}]
    for i, s in enumerate(stages):
        tensors.append({"index": i + 1, "name": f"t{i}", "what": f"stage {i}'s output ({s.shape.name})",
                        "lanes": [s.out_lanes], "true": s.layer.K if s.layer.engine == "grid" else s.layer.C,
                        "pixels": s.layer.OH * s.layer.OW, "consumers": [], "word_type": f"s{i}_out_t"})
    code_groups = regroups([s.layer for s in stages], [(s.in_lanes, s.out_lanes) for s in stages],
                           [None if c.residual is None else c.residual + 1 for c in layers], port_elems,
                           [None if c.source == i - 1 else c.source + 1 for i, c in enumerate(layers)])
    grouped = {g.consumer for g in code_groups}

    def consumer(tensor: int, stream: str, depth: int, bits: int, memory: str, kind: str, why: str) -> None:
        tensors[tensor]["consumers"].append({"stream": stream, "depth": depth, "bits": bits, "memory": memory,
                                             "type": kind, "why": why, "regroup": stream in grouped,
                                             "src_stream": stream + "_a" if stream in grouped else stream})

    for i, layer in enumerate(layers):
        # each consumer's FIFO as the model declares it (stage_fifos): a fold of the lanes it reads a word
        fifos = {role: (depth, int(bits), memory) for role, depth, bits, memory in stages[i].fifos}
        src = layer.source + 1
        tensors[src]["lanes"].append(lanes_in[i])
        consumer(src, f"t{src}_to_s{i}", *fifos["in"], f"s{i}_in_t", f"stage {i}'s input")
        if layer.residual is not None:
            res = layer.residual + 1
            tensors[res]["lanes"].append(stages[i].out_lanes)
            depth = fifos["skip"][0]
            consumer(res, f"t{res}_skip_s{i}", *fifos["skip"], f"s{i}_out_t",
                     f"the residual stage {i} adds: {depth} words, the model's")
    for t in tensors:  # as many channels as any lane count that touches the tensor reads or writes in whole folds
        t["channels"] = max(-(-t["true"] // lanes) * lanes for lanes in t["lanes"])
    for t in (tensors[0], tensors[-1]):  # the image and the result also in whole words of their ports
        channels, t["word"] = port_pixel(t["true"], t["lanes"][0], port_elems)
        t["channels"] = max(t["channels"], channels)
    consumer(len(stages), f"t{len(stages)}_result", 2, tensors[-1]["word"] * elem_bits, "srl", "out_word_t",
             "the result")
    cuts = {k.first for k in design.kernels if k.first}
    for t in tensors:  # the streams its producer (or a reader of it) writes: the kernel's output where it leaves it
        t["readers"] = [c["src_stream"] for c in t["consumers"]]
        t["outputs"] = ["stream_out"] if t["index"] in cuts else t["readers"]
        if t["index"]:
            producer = stages[t["index"] - 1]
            t["bits"], t["words"] = producer.out_lanes * elem_bits, t["pixels"] * -(-t["true"] // producer.out_lanes)
    types = {c["stream"]: (t["word_type"], c["type"]) for t in tensors for c in t["consumers"]}  # words in, out
    groups = [{**g.to_json(), "size": g.size, "tensor": g.tensor, "in_type": types[g.consumer][0],
               "out_type": types[g.consumer][1]} for g in code_groups]
    ctx = []
    integer = design.dtype == "int8"
    distance = design.distance
    for i, (s, layer) in enumerate(zip(stages, layers, strict=True)):
        n, p, q, grid = s.layer, s.in_lanes, s.out_lanes, s.layer.engine == "grid"
        cf = math.ceil(n.C / lanes_in[i])
        tg = math.ceil(n.R * n.S / p)
        t = n.R * n.S * cf
        lo, hi, slope = layer.activation
        pool = n.engine == "maxpool"
        stage = {"index": i, "name": s.shape.name, "kind": "grid" if grid else "pool" if pool else "dw",
                 "input": layer.source + 1,
                 # the window's padding: a convolution's zeros, a max pool's lowest value (torch pads it with -inf)
                 "pad_value": lowest(integer) if pool else 0,
                 "residual": None if layer.residual is None else layer.residual + 1, "p": p, "q": q,
                 "win_lanes": p if grid else p * q, "H": n.H, "W": n.W, "OH": n.OH, "OW": n.OW, "R": n.R, "S": n.S,
                 "stride": n.stride, "pad": n.pad, "cf": cf, "tg": tg, "T": t,
                 "in_lanes": lanes_in[i],  # the lanes its window reads: a word of its input, its line buffer's
                 "lb_rows": line_rows(n), "first_rows": line_reads(n)[0],
                 "folds": math.ceil(n.K / q) if grid else cf, "steps": t if grid else tg,
                 "per_pixel": t if grid else cf * tg, "pointwise": grid and pointwise(n), "distance": distance,
                 "packed": integer and grid and q % 2 == 0, "chain": packed_chain(p), "weights": s.weights,
                 "line": s.line, "ddr": s.weights == "ddr",
                 "in_stream": f"t{layer.source + 1}_to_s{i}",
                 "fifo_memory": {role: memory for role, _, _, memory in s.fifos},
                 "skip_stream": None if layer.residual is None else f"t{layer.residual + 1}_skip_s{i}",
                 "lo": c_float(lo), "hi": c_float(hi), "slope": c_float(slope),
                 # below zero: a multiply only for a leaky activation (what the model charges), else a compare
                 "slope_kind": "none" if slope == 1.0 else "zero" if slope == 0.0 else "leaky"}
        if integer and not pool:
            qz = layer.quant
            stage.update({k: int(qz[k]) for k in ("shift", "res_mult", "res_shift", "slope_mult", "qlo", "qhi")})
        ctx.append(stage)
    return tensors, ctx, groups


def write_pipeline_project(directory: Path, design: PipelineDesign, layers: Sequence[Any], image: np.ndarray,
                           frames: int = 2, top: str = "pipeline_kernel", network: str = "network") -> Path:
    """The project of ``design`` for the traced ``layers`` (``trace_chain``, one stage each, in order) on
    ``image`` [1, C, H, W], its test bench streaming it ``frames`` times; replaces ``directory`` at once."""
    from hetero_dse.hls.network_quant import quantize_run
    from hetero_dse.hls.network_run import NetworkRun, RunLayer
    from hetero_dse.hls.project import environment, network_flow

    if len(layers) != len(design.stages) or any(s.shape != c.shape for s, c in zip(design.stages, layers,
                                                                                   strict=False)):
        raise HeteroDSEError("the pipeline's stages are not the traced network's layers, one each in order")
    for k in design.kernels[1:]:  # a kernel reads only the stream from the one before: nothing reads further back
        back = [i for i in range(k.first, k.last + 1) for t in (layers[i].source, layers[i].residual)
                if t is not None and t + 1 < k.first]
        if back:
            raise HeteroDSEError(f"the pipeline is cut before stage {k.first}, but stage {back[0]} reads a tensor "
                                 "from before the cut: the traced network is not the chain the design was cut for")
    from hetero_dse.hls.network_project import MAX_DATA_BYTES
    from hetero_dse.units import fmt_bytes

    size = sum(np.asarray(c.weight).nbytes for c in layers) + np.asarray(image).nbytes * frames
    if size > MAX_DATA_BYTES:
        raise HeteroDSEError(f"no pipeline project written: its data would hold {fmt_bytes(size)} of weights and "
                             f"images (limit {fmt_bytes(MAX_DATA_BYTES)})")
    integer = design.dtype == "int8"
    elem_bits = 8 * np.dtype(design.dtype).itemsize
    if integer:  # the same integers as the shared kernel's int8 (per-channel weights, requantised epilogue)
        tensor = lambda i: None if i is None else ("input:x" if i < 0 else f"layer:{i}")  # noqa: E731
        run = NetworkRun(network, [RunLayer(SimpleNamespace(shape=c.shape), c.weight, c.bias, tensor(c.source),
                                            tensor(c.residual), c.activation, c.reference, c.flatten)
                                   for c in layers], {"x": np.asarray(image, dtype=np.float32)}, "torch")
        run = quantize_run(run)
        image = run.inputs["x"]
        layers = [SimpleNamespace(**{**c.__dict__, "weight": r.weight, "bias": r.bias, "reference": r.reference,
                                     "quant": r.quant}) for c, r in zip(layers, run.layers, strict=True)]
    first = layers[0].shape
    im2col = first.engine == "grid" and first.from_host and first.R * first.S > 1
    if any(s.layer.engine != "grid" and s.in_lanes != 1 for s in design.stages):
        raise HeteroDSEError("the pipeline's depthwise window sends one tap a trip: a depthwise stage of more than "
                             "one window lane is not built (its line buffer would need a read port a tap)")
    tensors, stages, groups = _plan(design, layers)
    split = design.kernels or [Kernel(0, len(stages) - 1, 0)]
    one = len(split) == 1
    kernels = [{"index": i, "name": top if one else f"{top}_{i}", "suffix": "" if one else f"_{i}",
                "of": "" if one else f" of kernel {i}", "slr": k.slr, "slrs": list(k.slrs), "spans": len(k.slrs) > 1,
                "where": "–".join(f"SLR{n}" for n in sorted(k.slrs)), "stages": stages[k.first:k.last + 1],
                "moved": list(k.moved),
                "link_in": k.first or None, "link_out": None if k.last == len(stages) - 1 else k.last + 1,
                "tensors": [*range(k.first, k.last + 1), *([len(stages)] if k.last == len(stages) - 1 else [])],
                # the index of its frames argument (after its ports: image or in, result or out, weights, w<i>…)
                "frames_arg": 3 + sum(s["ddr"] for s in stages[k.first:k.last + 1])}
               for i, k in enumerate(split)]
    dtype = np.int8 if integer else np.float32
    port_elems = design.board.memory.port_bits // (8 * np.dtype(dtype).itemsize)
    img_v, out_v = tensors[0]["word"], tensors[-1]["word"]
    pixels = _im2col(image, first.R, first.S, first.stride, first.pad) if im2col else \
        np.asarray(image)[0].transpose(1, 2, 0).reshape(-1, first.C)
    img = np.zeros((tensors[0]["pixels"], tensors[0]["channels"]), dtype=dtype)
    img[:, :pixels.shape[1]] = pixels
    ref = np.asarray(layers[-1].reference)
    ref = ref.reshape(ref.shape[0], ref.shape[1], -1)[0].T if ref.ndim == 4 else ref.reshape(1, -1)
    expected = np.zeros((tensors[-1]["pixels"], tensors[-1]["channels"]), dtype=dtype)
    expected[:, :ref.shape[1]] = ref
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    a = ARITHMETIC[design.dtype]
    # the weights' port: a row of a stage in whole words, each stage's rows after the last's
    wgt_v = port_elems
    offset = 0
    for st in stages:
        rows = 0 if st["kind"] == "pool" else st["folds"] * st["steps"]
        st["w_rows"], st["w_words"], st["w_offset"] = rows, -(-st["p"] * st["q"] // wgt_v), offset
        offset += st["w_rows"] * st["w_words"]
    words = np.zeros((offset, wgt_v), dtype=dtype)
    for st, rows in zip(stages, weight_rows(layers, stages, im2col), strict=True):
        flat = np.zeros((st["w_rows"], st["w_words"] * wgt_v))
        flat[:, :rows.shape[1]] = rows
        words[st["w_offset"]:st["w_offset"] + st["w_rows"] * st["w_words"]] = flat.reshape(-1, wgt_v)
    io = io_trips(design.stages, port_elems)
    model = {"read": io["read"] * frames, "load": load_trips(design.stages, wgt_v), "write": io["write"] * frames,
             "stages": [{"window": window_trips(s.layer, s.in_lanes, s.out_lanes) * frames,
                         "mac": stage_cycles(s.layer, s.in_lanes, s.out_lanes, design.distance) * frames,
                         "wstream": stream_trips(s.layer, s.in_lanes, s.out_lanes, wgt_v) * frames
                         if s.weights == "ddr" else 0}
                        for s in design.stages],
             "regroups": {g.consumer: g.trips * frames for g in design.regroups},
             "links": [tensors[k["link_in"]]["words"] * frames if k["link_in"] else 0 for k in kernels]}
    ctx = {"top": top, "network": network, "regroups": groups, "kernels": kernels,
           "kernel_names": [k["name"] for k in kernels], "hls_top": kernels[0]["name"], "board": design.board.name,
           "part": design.board.part,
           "clock_mhz": design.clock_mhz, "ctype": "signed char" if integer else "float",
           "acc_ctype": "int" if integer else "float", "integer": integer, "tensors": tensors, "stages": stages,
           "img_v": img_v, "out_v": out_v, "image_words": img.size // img_v, "result_words": expected.size // out_v,
           "im2col": im2col, "frames": frames, "atol": "0.0" if integer else repr(1e-4 * scale),
           "rtol": "0.0" if integer else "1e-3",
           "reference_source": "the same integer arithmetic" if integer else "torch, the whole network in float",
           # what the build scripts and the README take (a port of narrow words reaches AXI4's 256 beats first)
           **network_flow(design.board, design.clock_mhz, min(img_v, out_v) * np.dtype(dtype).itemsize),
           "dtype": design.dtype, "port_bits": min(img_v, out_v) * 8 * np.dtype(dtype).itemsize,
           "ops": {"mul": a.mul_core[0], "mul_impl": a.mul_core[1]}, "wgt_v": wgt_v, "weight_words": offset,
           # each port's bursts 4 KB of its own words, as the model charges its buffer (pipeline_buffers)
           "beats": {k: axi_max_beats(v * np.dtype(dtype).itemsize) for k, v in
                     (("image", img_v), ("result", out_v), ("weights", wgt_v))},
           "interval": f"{design.interval_cycles:,.0f}", "fps": f"{design.fps:,.0f}",
           "achieved_mhz": f"{design.achieved_mhz:.0f}"}
    for st, s in zip(stages, design.stages, strict=True):
        st["cycles"] = f"{s.cycles:,}"
    try:
        with atomic_directory(Path(directory)) as partial:
            env = environment()
            linked = {} if one else {"pipeline/xrt_links.h.j2": "sim/include/xrt/xrt_links.h"}
            for template, target in {**TEMPLATES, **(PLATFORM_TEMPLATES if design.board.platform else {}),
                                     **linked}.items():
                (partial / target).parent.mkdir(parents=True, exist_ok=True)
                (partial / target).write_text(env.get_template(template).render(**ctx))
            (partial / "src" / "weights.h").write_text(params_header(design, layers, tensors))
            for source, target in STATIC.items():
                (partial / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(data_dir("hls_templates") / source, partial / target)
            (partial / "data").mkdir()
            np.tile(img.reshape(-1), frames).tofile(partial / "data" / "image.bin")
            np.tile(expected.reshape(-1), frames).tofile(partial / "data" / "expected.bin")
            words.tofile(partial / "data" / "weights.bin")
            record = {"network": network, "board": design.board.name, "top": top, "architecture": "pipeline",
                      "generator": f"hetero_dse {__version__}", "design": design.to_json(), "frames": frames,
                      "trips": model, "predicted": {"ops": 2 * design.macs * frames},
                      "fifos": [{"stream": c["stream"], "depth": c["depth"], "tensor": t["name"],
                                 "bits": c["bits"], "memory": c["memory"]}
                                for t in tensors for c in t["consumers"]] + [
                          {"stream": g.consumer + "_a", "depth": 2, "bits": g.in_lanes * elem_bits, "memory": "srl"}
                          for g in design.regroups] + [
                          {"stream": f"s{i}_{role}", "depth": depth, "bits": int(bits), "memory": memory}
                          for i, s in enumerate(design.stages) for role, depth, bits, memory in s.fifos
                          if role in ("win", "wload")],
                      # each stage's clamp as its epilogue writes it (int8: the requantised range), which the
                      # lint holds the code to: test data need not reach a bound for a wrong one to matter
                      "clamps": [{"stage": c["index"], "lo": c["qlo"] if integer else c["lo"],
                                  "hi": c["qhi"] if integer else c["hi"]} for c in stages if c["kind"] != "pool"]}
            (partial / "design.json").write_text(json.dumps(record, indent=2, default=float) + "\n")
    except OSError as exc:
        raise HeteroDSEError(f"cannot write the pipeline project to {directory}: {exc.strerror or exc}") from exc
    return Path(directory)


def check_pipeline_trips(directory: Path, output: str) -> list[str]:
    """Where the C-simulation's trip counts (the test bench's ``output``) differ from the model's in the
    project's design.json: one line each (none: the code runs the loops the model charges)."""
    model = json.loads((Path(directory) / "design.json").read_text())["trips"]
    problems = []
    io = re.search(r"trips read=(\d+) write=(\d+) load=(\d+)", output)
    if io is None:
        return ["the C-simulation printed no trip counts"]
    for kind, got in zip(("read", "write", "load"), io.groups(), strict=True):
        if int(got) != model[kind]:
            problems.append(f"the {kind} process ran {got} iterations, the model charges {model[kind]}")
    ran = {int(m.group(1)): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
           for m in re.finditer(r"stage (\d+) trips window=(\d+) mac=(\d+) wstream=(\d+)", output)}
    for i, m in enumerate(model["stages"]):
        got = ran.get(i)
        if got is None:
            problems.append(f"stage {i}: the C-simulation printed no trip counts")
            continue
        for kind, value in zip(("window", "mac", "wstream"), got, strict=True):
            if value != m.get(kind, 0):
                problems.append(f"stage {i}: its {kind} process ran {value} iterations, the model charges "
                                f"{m.get(kind, 0)}")
    links = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"link (\d+) trips=(\d+)", output)}
    for k, want in enumerate(model.get("links", [])):
        if links.get(k, 0) != want:
            problems.append(f"kernel {k}'s stream from the kernel before ran {links.get(k, 0)} iterations, the model "
                            f"charges {want}")
    ran = {m.group(1): int(m.group(2)) for m in re.finditer(r"regroup (\w+) trips=(\d+)", output)}
    for name in sorted(set(ran) | set(model.get("regroups", {}))):
        got, want = ran.get(name), model.get("regroups", {}).get(name)
        if got != want:
            problems.append(f"the regroup for {name} ran {got if got is not None else 'no'} iterations, the model "
                            f"charges {want if want is not None else 'no regroup there'}")
    return problems
