"""The layer pipeline's design as the explorer (``cost_models/fpga_pipeline.py``) finds it: its stages, each a
layer with its lanes, cycles, resources and memories, and the whole design's clock, interval, latency and
figures, as ``design.json`` and the report give them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models.fpga_network import NetLayer
from cost_models.fpga_network_depths import accumulation_distance
from cost_models.fpga_pipeline_slrs import Kernel
from cost_models.fpga_pipeline_streams import Regroup
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["PipelineDesign", "Stage"]

_DSP = RESOURCE_KINDS.index("dsp")


@dataclass
class Stage:
    shape: LayerShape
    layer: NetLayer
    in_lanes: int
    out_lanes: int
    cycles: int
    resources: np.ndarray
    skip_pixels: int = 0
    skip_source: int | None = None  # the tensor (0 the image, i + 1 stage i's output) it adds as a residual
    in_source: int | None = None  # the tensor its window reads, where not the stage's before it (a branch)
    in_pixels: int = 0  # a branch's: the pixels its input's FIFO holds while the other path catches up
    weights: str = "bram"  # where its weights live: bram, lutram, uram (the code's BIND_STORAGE) or ddr
    line: str = "registers"  # where its line buffer lives: bram, uram, lutram, or registers (a 1×1 convolution)
    fifos: list[tuple[str, int, float, str]] = field(default_factory=list)  # stage_fifos': the code declares these

    def to_json(self, clock_hz: float) -> dict[str, Any]:
        return {"layer": self.shape.name, "engine": self.layer.engine, "in_lanes": self.in_lanes,
                "out_lanes": self.out_lanes, "cycles": self.cycles, "seconds": self.cycles / clock_hz,
                "dsp": float(self.resources[_DSP]), "skip_pixels": self.skip_pixels,
                "skip_source": self.skip_source, "in_source": self.in_source, "in_pixels": self.in_pixels,
                "weights": self.weights,
                "line": self.line, "fifos": [{"role": r, "depth": d, "bits": int(b), "memory": m}
                                             for r, d, b, m in self.fifos]}


@dataclass
class PipelineDesign:
    board: Board
    dtype: str
    stages: list[Stage]
    resources: dict[str, float]
    clock_mhz: float
    achieved_mhz: float
    weights_bytes: int
    image_bytes: int
    io_cycles: float  # cycles a frame's image and result take on the port, if that is slower than every stage
    timing: dict[str, Any] = field(default_factory=dict)
    regroups: list[Regroup] = field(default_factory=list)  # between producers and consumers of other lanes
    kernels: list[Kernel] = field(default_factory=list)  # one an SLR (``fpga_pipeline_slrs``); none: one kernel

    @property
    def interval_cycles(self) -> float:
        return max(max(s.cycles for s in self.stages), self.io_cycles, *(g.trips for g in self.regroups))

    @property
    def fps(self) -> float:
        return self.achieved_mhz * 1e6 / self.interval_cycles

    @property
    def latency_s(self) -> float:
        """An image's time through the pipeline (estimate): the interval, plus for each stage the share of its
        image it waits for before its first output row (its window's rows, as its producer delivers them)."""
        fill = sum(s.cycles * min(1.0, max(s.layer.R - s.layer.pad, 1) / max(s.layer.H, 1)) for s in self.stages)
        return (self.interval_cycles + fill) / (self.achieved_mhz * 1e6)

    @property
    def macs(self) -> int:
        return sum(s.shape.macs for s in self.stages)

    @property
    def distance(self) -> int:
        """Partial sums each PE array rotates over: an int32 add takes a cycle, a float add its latency."""
        return 1 if self.dtype == "int8" else accumulation_distance(self.dtype, self.clock_mhz)

    @property
    def bottleneck(self) -> Stage:
        return max(self.stages, key=lambda s: s.cycles)

    def to_json(self) -> dict[str, Any]:
        hz = self.achieved_mhz * 1e6
        caps = self.board.caps
        return {"architecture": "layer-pipelined", "board": self.board.name,
                "dtype": self.dtype, "stages": len(self.stages), "clock_mhz": self.clock_mhz,
                "achieved_mhz": self.achieved_mhz, "fps": self.fps, "latency_s": self.latency_s,
                "gops": 2 * self.macs * self.fps / 1e9, "interval_cycles": self.interval_cycles,
                "bottleneck": self.bottleneck.shape.name, "weights_bytes": self.weights_bytes,
                "resources": self.resources,
                "utilisation": {k: self.resources[k] / caps[k] if caps[k] else 0.0 for k in RESOURCE_KINDS},
                "per_stage": [{**s.to_json(hz), "distance": self.distance} for s in self.stages],
                "regroups": [g.to_json() for g in self.regroups],
                "ddr_weights": [s.shape.name for s in self.stages if s.weights == "ddr"],
                "kernels": [k.to_json() for k in self.kernels],
                "basis": "model only (cost_models/fpga_pipeline.py): one stage per layer, weights on chip, "
                         "folds chosen greedily; the latency's fill is an estimate"}


