"""A network kernel's design as explored (``fpga_network_design``): each layer's engine, tiles and cycles, and the
design's engines, resources and clock, with the figures a report and the code generator read of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cost_models.fpga_network import EngineShape, NetLayer, Tiles, network_trips
from cost_models.fpga_network_ports import arena_ports
from cost_models.fpga_network_resources import engine_storage
from cost_models.fpga_slrs import lone_slr
from cost_models.fpga_winograd import winograd_record
from hetero_dse.hardware.board import RESOURCE_KINDS, Board
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["NetworkDesign", "PlacedLayer"]


@dataclass
class PlacedLayer:
    shape: LayerShape
    count: int
    layer: NetLayer  # as the kernel runs it
    im2col: bool
    tiles: Tiles
    cycles: float

    def to_json(self, clock_hz: float) -> dict[str, Any]:
        return {"layer": self.shape.name, "count": self.count, "engine": self.layer.engine,
                "shape": self.layer.__dict__, "im2col": self.im2col, "tiles": self.tiles.__dict__,
                "cycles": self.cycles, "latency_s": self.cycles / clock_hz}


@dataclass
class NetworkDesign:
    """The network's accelerator: its engines, each layer's tiles and cycles, resources, the one clock."""

    board: Board
    dtype: str
    block: int  # channels of every activation padded to this
    word: int  # elements a DDR word
    engines: dict[str, EngineShape]
    layers: list[PlacedLayer]
    resources: dict[str, float]
    clock_mhz: float  # the target
    achieved_mhz: float
    candidates: int = 0
    #: lane choices the search passed over because their layers' compute floors alone are slower than a design
    #: it had (``compute_floor``)
    passed_over: int = 0
    timing: dict[str, Any] = field(default_factory=dict)
    #: kernels of this design side by side on the device (seed 000's pipelines), each on its own image
    compute_units: int = 1
    #: why the throughput search (``fpga_network_units``) took no more compute units ("": it was not searched)
    units_stop: str = ""
    #: each compute unit's SLR where each fits within one (``slr_placement``; () where v++ places them)
    unit_slrs: tuple[int, ...] = ()
    #: images one run of the descriptor table takes (``fpga_network_units.batched``): each convolution once an image,
    #: each linear layer once over all of them; ``latency_s`` is the run's
    images: int = 1
    #: where this kernel's units are among a set's (``fpga_network_kernels``): their banks those of the units from
    #: this one on (``port_banks``), the set's kernels before it holding the others
    first_unit: int = 0

    @property
    def slrs(self) -> tuple[int, ...]:
        """Each compute unit's SLR, as ``connectivity.cfg`` keeps it: ``unit_slrs``, or a lone kernel's where it
        fits one SLR (``lone_slr``); () where v++ places them."""
        if self.unit_slrs or self.compute_units != 1:
            return self.unit_slrs
        slr = lone_slr(self.board, [self.resources[k] for k in RESOURCE_KINDS])
        return () if slr is None else (slr,)

    @property
    def latency_s(self) -> float:
        return sum(p.count * p.cycles for p in self.layers) / (self.achieved_mhz * 1e6)

    @property
    def fps(self) -> float:
        """Images a second: each compute unit's run of ``images`` images in ``latency_s``."""
        return self.compute_units * self.images / self.latency_s

    @property
    def w_ports(self) -> int:
        """The weights' ports the kernel has: the most any engine reads at once."""
        return max(e.w_ports for e in self.engines.values())

    @property
    def arena_ports(self) -> int:
        """The ports each of the arena's streams spreads its word over (``fpga_network_ports.arena_ports``)."""
        bits = self.word * (8 if self.dtype == "int8" else 32)
        return arena_ports(bits, self.board.memory.port_bits)

    @property
    def wword(self) -> int:
        """Elements a word of the weights' port (every engine's the same: one port)."""
        return next(iter(self.engines.values())).w_word

    @property
    def pword(self) -> int:
        return next(iter(self.engines.values())).p_word

    @property
    def macs(self) -> int:
        return sum(p.count * p.shape.macs for p in self.layers)

    @property
    def utilisation(self) -> dict[str, float]:
        return {k: self.resources[k] / self.board.cap(k) if self.board.cap(k) else 0.0 for k in RESOURCE_KINDS}

    def trips(self) -> list[dict[str, int]]:
        return [network_trips(self.engines[p.layer.engine], p.layer, p.tiles, p.shape.residual) for p in self.layers]

    def _layer_json(self, p: PlacedLayer, hz: float) -> dict[str, Any]:
        """A layer's record, with its DDR traffic against seed 001's I/O lower bound where one applies
        (``fpga_network_io``: a 3×3 layer on the Winograd engine)."""
        from cost_models.fpga_network_io import layer_io

        io = layer_io(self.engines[p.layer.engine], p.layer, p.tiles, self.dtype, (p.shape.C, p.shape.K),
                      p.shape.residual)
        return {**p.to_json(hz), **({"io": io} if io else {})}

    def to_json(self) -> dict[str, Any]:
        hz = self.achieved_mhz * 1e6
        sides = {"grid": ("output-channel", "input-channel"), "depthwise": ("channel",),
                 "winograd": ("output-channel", "input-channel")}
        engines = [{"kind": kind, "lanes": dict(zip(sides[kind], (e.out_lanes, e.in_lanes), strict=False)),
                    "buffer_rows": {"input": e.in_rows, "weights": e.w_rows, "output": e.out_rows,
                                    **({"tile": e.tile_rows} if e.tile else {})},
                    "accumulation_distance": e.distance, "params": e.params, "packed": e.packed,
                    **({"chain": e.chain} if e.chain > 1 else {}), "weight_ports": e.w_ports,
                    **({"taps": e.taps, "tap_rows": e.tap_rows} if kind == "depthwise" else {}),
                    "storage": engine_storage(e, self.dtype, self.board.cap("uram") > 0),
                    **(winograd_record(e.tile, self.dtype) | {"w_transform": e.w_transform, "pointwise": e.pointwise,
                                                              "transform_cores": "dsp" if e.transform_dsp else "fabric"}
                       if e.tile else {})}
                   for kind, e in self.engines.items()]
        # the multiply-adds a cycle of direct convolution each engine stands for (Winograd's m²·9 per α² products)
        macs_peak = sum(e.out_lanes * e.lane_sums * (9 * e.tile ** 2 if e.tile else 1) for e in self.engines.values())
        return {"board": self.board.name, "dtype": self.dtype, "block": self.block, "word": self.word,
                "arena_ports": self.arena_ports, "wword": self.wword, "pword": self.pword, "weight_ports": self.w_ports,
                "engines": engines, "clock_mhz": self.clock_mhz, "achieved_mhz": self.achieved_mhz,
                "latency_s": self.latency_s, "fps": self.fps,
                "compute_units": self.compute_units, **({"images": self.images} if self.images > 1 else {}),
                **({"units_stop": self.units_stop} if self.units_stop else {}),
                **({"first_unit": self.first_unit} if self.first_unit else {}),
                **({"unit_slrs": list(self.slrs)} if self.slrs else {}),
                "gops": 2 * self.macs * self.compute_units / self.latency_s / 1e9,
                "peak_gops": 2 * macs_peak * hz / 1e9, "resources": self.resources, "utilisation": self.utilisation,
                "candidates": self.candidates, "passed_over": self.passed_over,
                "layers": [self._layer_json(p, hz) for p in self.layers],
                "basis": "the model of the generated network kernel (cost_models/fpga_network.py): the trip counts of "
                         "its loops, which its C-simulation counts, the DDR bursts each process issues and the "
                         "DATAFLOW overlap of its stages"}
