"""How a layer pipeline's stages pass their pixels (``cost_models/fpga_pipeline.py``): FINN's streams, a word of
the producer's output lanes at a time, each fold of a pixel as its PE array finishes it. A FIFO of whole pixels
would be as wide as the tensor's channels: two words of 960 int8 channels are 7,680 shift-register LUTs, and a
window that picks a fold out of a whole pixel is a multiplexer of every fold on each lane.

Where the consumer reads words of other lanes (its window's lanes, the output lanes that add a residual, the
port's word of the result), a regroup process sits between: it reads a pixel's words into a register of its
channels, then writes them as the consumer's words, one word a trip either way. Where the lanes agree the
producer's FIFO goes straight to the consumer. Each FIFO is bound where the model charges it (``fifo_storage``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_models.fpga_costs import NETWORK_OUTSTANDING, axi_buffer_bram18, axi_max_beats
from cost_models.fpga_network import NetLayer
from cost_models.fpga_network_resources import mux_luts
from cost_models.fpga_pipeline_storage import fifo_storage, has_weights, in_lanes_of, stream_trips
from hetero_dse.hardware.board import RESOURCE_KINDS, Board

__all__ = ["REGROUP_CONTROL_FF", "REGROUP_CONTROL_LUT", "Regroup", "folds", "frame_bytes", "image_trips", "in_lanes_of",
           "io_cycles", "io_trips", "load_trips", "pipeline_buffers", "port_pixel", "regroups", "stage_fifos",
           "stage_regroups"]

#: a regroup's counter, its phase compare and handshakes (*estimate*, no synthesis behind it)
REGROUP_CONTROL_LUT, REGROUP_CONTROL_FF = 60, 80
_LUT, _FF = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("ff")


def folds(channels: int, lanes: int) -> int:
    return -(-channels // lanes)


def port_pixel(channels: int, lanes: int, port_elems: int) -> tuple[int, int]:
    """A pixel of the image (or the result) on its port: its channels padded to whole folds of the ``lanes``
    that take them and to whole words, and the elements a word: no wider than the port or the lanes, and a power
    of two (a vector of 52 elements is laid out as 64 in memory): 147 channels on 52 lanes are 156, in 5 words
    of 32 on a 64-element port, 160."""
    word = min(port_elems, 1 << (lanes.bit_length() - 1))
    folded = folds(channels, lanes) * lanes
    return -(-folded // word) * word, word


def pipeline_buffers(port_bits: int, elem_bits: int) -> list[tuple[int, int]]:
    """The kernel's m_axi ports' burst buffers, (bits, beats) each, bursts of 4 KB (each port's own INTERFACE
    setting, ``hls_templates/pipeline/``): the image's, the result's (a write: a strobe bit a byte beside), the
    weights' (a word of the port). The image's and the result's words are their stages' lanes at most the port's
    (``port_pixel``): each charged at the word whose buffer is largest (*estimate*, at most 2 BRAM18K over)."""
    words = [elem_bits << i for i in range(16) if elem_bits << i <= port_bits]
    image = max(words, key=lambda b: axi_buffer_bram18(axi_max_beats(b // 8), b, NETWORK_OUTSTANDING))
    result = max(words, key=lambda b: axi_buffer_bram18(axi_max_beats(b // 8), b + b // 8, NETWORK_OUTSTANDING))
    return [(image, axi_max_beats(image // 8)), (result + result // 8, axi_max_beats(result // 8)),
            (port_bits, axi_max_beats(port_bits // 8))]


def io_trips(stages: Sequence[Any], port_elems: int) -> dict[str, int]:
    """Trips of the image reader and the result writer for one image: a port word a trip, a pixel's channels
    padded to the lanes of the stage that reads (or writes) them, a word as ``port_pixel`` gives it."""
    first, last = stages[0], stages[-1]
    return image_trips(first.layer, in_lanes_of(first.layer, first.in_lanes, first.out_lanes), last.layer,
                       last.out_lanes, port_elems)


def frame_bytes(image: int, readers: Sequence[tuple[NetLayer, int, int]], port_elems: int, port_bits: int) -> int:
    """The bytes a frame moves on the channel: its image and result (``image``), and the weights that each stage
    reading them from DDR, (layer, in lanes, out lanes) each, reads in whole words of its port."""
    return image + sum(stream_trips(n, p, q, port_elems) for n, p, q in readers) * port_bits // 8


def image_trips(first: NetLayer, lanes_in: int, last: NetLayer, lanes_out: int, port_elems: int) -> dict[str, int]:
    """``io_trips`` of a pipeline whose first stage reads ``first`` on ``lanes_in`` lanes and whose last writes
    ``last`` from ``lanes_out``."""
    c_in, word_in = port_pixel(first.C, lanes_in, port_elems)
    k_out, word_out = port_pixel(last.K, lanes_out, port_elems)
    return {"read": first.H * first.W * c_in // word_in, "write": last.OH * last.OW * k_out // word_out}


def io_cycles(board: Board, io: dict[str, int], image: int, achieved_mhz: float) -> float:
    """Cycles a frame's image and result take on the port: their trips (``io_trips``), or the frame's bytes at the
    port's bandwidth at the clock the design closes at, if that is slower."""
    return max(*io.values(), image * achieved_mhz / (board.memory.sustained_gbps_per_channel * 1e3))


def stage_fifos(layer: NetLayer, in_lanes: int, out_lanes: int, dtype: str, caps: dict[str, float],
                residual: bool = False, skip_pixels: int = 0, in_pixels: int = 0) -> list[tuple[str, int, float, str]]:
    """The FIFOs the stage's code declares, (role, depth, bits, memory) each: ``in``, its input's words, each a
    fold of the lanes its window reads; ``win``, its window's words; ``wload``, its weight rows as the load
    brings them (a max pool has none); ``skip``, the residual it adds, a fold of its output lanes a word, as
    many words as the ``skip_pixels`` its block holds back and two more (a FIFO just deep enough leaves no slack, and a
    C-simulation's streams are unbounded, so none shows it); where the stage reads a tensor another path also
    reads (a branch, ``branch_lag``), its ``in`` holds the ``in_pixels`` that path runs ahead, and two words more.
    The memory is ``fifo_storage``'s."""
    bits = 8.0 * np.dtype(dtype).itemsize
    grid = layer.engine == "grid"
    lanes = in_lanes_of(layer, in_lanes, out_lanes)
    out = [("in", in_pixels * folds(layer.C, lanes) + 2, lanes * bits),
           ("win", 2, (in_lanes if grid else in_lanes * out_lanes) * bits)]
    if has_weights(layer):
        out.append(("wload", 2, in_lanes * out_lanes * bits))
    if residual:
        k = layer.K if grid else layer.C
        out.append(("skip", skip_pixels * folds(k, out_lanes) + 2, out_lanes * bits))
    return [(role, depth, width, fifo_storage(depth, width, caps)) for role, depth, width in out]


@dataclass(frozen=True)
class Regroup:
    """A process between a producer whose pixel is ``in_words`` words of ``in_lanes`` and a consumer that reads
    it as ``out_words`` of ``out_lanes``: ``consumer`` is the stream it feeds (``t{tensor}_to_s{i}``,
    ``t{tensor}_skip_s{i}``, ``t{n}_result``), ``pixels`` a frame's."""

    consumer: str
    pixels: int
    in_words: int
    in_lanes: int
    out_words: int
    out_lanes: int

    @property
    def tensor(self) -> int:
        """The tensor whose words it regroups, as ``regroups`` names its stream: ``t{tensor}_...``."""
        return int(self.consumer[1:].split("_", 1)[0])

    @property
    def stage(self) -> int:
        """The stage it feeds (the result's regroup: the last stage, whose output it is), from its stream's name
        (``t{j}_to_s{i}``, ``t{j}_skip_s{i}``, ``t{n}_result``); a pipeline cut into kernels keeps it in that
        stage's kernel."""
        return self.tensor - 1 if self.consumer.endswith("_result") else int(self.consumer.rsplit("_s", 1)[1])

    @property
    def kind(self) -> str:
        """``gather`` where the output word is whole input words (a word of its lanes filled a slot at a time,
        sent as it fills or the pixel ends), ``split`` where the input word is whole output words (each sent in
        turn), else ``pixel`` (the whole pixel in a register, then sent)."""
        if self.out_lanes % self.in_lanes == 0:
            return "gather"
        return "split" if self.in_lanes % self.out_lanes == 0 else "pixel"

    @property
    def ratio(self) -> int:
        """Input words an output word (gather), output words an input word (split)."""
        big, small = max(self.in_lanes, self.out_lanes), min(self.in_lanes, self.out_lanes)
        return big // small

    @property
    def size(self) -> int:
        """The register's channels: an output word (gather), an input word (split), else as many as either
        side's words of a pixel hold (the rest read as zero)."""
        if self.kind != "pixel":
            return max(self.in_lanes, self.out_lanes)
        return max(self.in_words * self.in_lanes, self.out_words * self.out_lanes)

    @property
    def in_mask(self) -> int:
        """The input word's index masked to its range (a power of two less one): the code's, so that synthesis
        knows the range and each register channel is written from one lane."""
        return (1 << max((self.ratio if self.kind == "gather" else self.in_words) - 1, 0).bit_length()) - 1

    @property
    def out_mask(self) -> int:
        return (1 << max((self.ratio if self.kind == "split" else self.out_words) - 1, 0).bit_length()) - 1

    @property
    def mux_inputs(self) -> int:
        """The words an output lane may read, as synthesis sees the masked index: up to the mask, within the
        register (a gather's lanes each read one place)."""
        if self.kind == "gather":
            return 1
        return min(self.out_mask + 1, -(-self.size // self.out_lanes))

    @property
    def trips(self) -> int:
        """A frame's, a word a trip: a gather's input words (it sends on the trip that fills a word), a split's
        output words (it reads on the trip that starts a word), else each pixel's words read, then written."""
        per = {"gather": self.in_words, "split": self.out_words}.get(self.kind, self.in_words + self.out_words)
        return self.pixels * per

    def resources(self, dtype: str) -> np.ndarray:
        """In ``RESOURCE_KINDS`` order: the register (each channel written from one lane of one input word, so
        no multiplexer: a clock enable), each output lane's multiplexer of the words it may come from
        (``mux_inputs``), the FIFO of input words before it (two, in shift registers), and its control."""
        bits = 8.0 * np.dtype(dtype).itemsize
        res = np.zeros(len(RESOURCE_KINDS))
        res[_FF] += self.size * bits + REGROUP_CONTROL_FF
        res[_LUT] += self.out_lanes * bits * mux_luts(self.mux_inputs) + REGROUP_CONTROL_LUT
        fifo_storage(2, self.in_lanes * bits, {}, res)
        return res

    def to_json(self) -> dict[str, Any]:
        return {"consumer": self.consumer, "pixels": self.pixels, "in_words": self.in_words,
                "kind": self.kind, "ratio": self.ratio, "in_mask": self.in_mask, "out_mask": self.out_mask,
                "in_lanes": self.in_lanes, "out_words": self.out_words, "out_lanes": self.out_lanes,
                "trips": self.trips}


def regroups(layers: list[NetLayer], lanes: list[tuple[int, int]], skip_sources: list[int | None],
             port_elems: int, in_sources: Sequence[int | None] | None = None) -> list[Regroup]:
    """The regroups a pipeline of ``layers`` (a chain: stage ``i`` reads tensor ``i``, the output of stage
    ``i - 1``, tensor 0 the image) on ``lanes`` (each stage's input and output lanes) needs: on each edge whose
    producer's words (the image port's, a stage's output lanes) differ from its consumer's (a window's lanes,
    the output lanes of a stage that adds the tensor as a residual, ``skip_sources[i]``; the result port's). A
    stage of a branch reads tensor ``in_sources[i]`` instead (none: its own, ``i``)."""
    first, (p0, q0) = layers[0], lanes[0]
    img_channels, img_word = port_pixel(first.C, in_lanes_of(first, p0, q0), port_elems)

    def producer(tensor: int) -> tuple[int, int]:  # (words a pixel, lanes a word)
        if tensor == 0:
            return img_channels // img_word, img_word
        n, (_, q) = layers[tensor - 1], lanes[tensor - 1]
        return folds(n.K if n.engine == "grid" else n.C, q), q

    out = []
    for i, (n, (p, q)) in enumerate(zip(layers, lanes, strict=True)):
        src = i if in_sources is None or in_sources[i] is None else in_sources[i]
        words, width = producer(src)
        lanes_in = in_lanes_of(n, p, q)
        if width != lanes_in:
            out.append(Regroup(f"t{src}_to_s{i}", n.H * n.W, words, width, folds(n.C, lanes_in), lanes_in))
        src = skip_sources[i]
        if src is not None:
            words, width = producer(src)
            if width != q:
                k = n.K if n.engine == "grid" else n.C
                out.append(Regroup(f"t{src}_skip_s{i}", n.OH * n.OW, words, width, folds(k, q), q))
    last, (_, q) = layers[-1], lanes[-1]
    words, width = producer(len(layers))
    channels, word = port_pixel(words * width, q, port_elems)
    if word != q:
        out.append(Regroup(f"t{len(layers)}_result", last.OH * last.OW, words, width, channels // word, word))
    return out


def load_trips(stages: Sequence[Any], port_elems: int) -> int:
    """Trips of the weight load (once, before the first image): each stage's weight rows in whole words of the
    weights' port, a row of ``in_lanes × out_lanes`` weights taking ``⌈in_lanes · out_lanes / word⌉``; none of
    a stage that reads its weights from DDR each image."""
    return sum(stream_trips(s.layer, s.in_lanes, s.out_lanes, port_elems) for s in stages if s.weights != "ddr")


def stage_regroups(stages: Sequence[Any], port_elems: int) -> list[Regroup]:
    """The regroups a pipeline of ``stages`` needs (``regroups``)."""
    return regroups([s.layer for s in stages], [(s.in_lanes, s.out_lanes) for s in stages],
                    [s.skip_source for s in stages], port_elems, [s.in_source for s in stages])
