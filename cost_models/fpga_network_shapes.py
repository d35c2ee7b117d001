"""The shapes the network kernel's model (``fpga_network``) takes: a layer as the shared kernel runs it
(``NetLayer``, what ``padded`` makes of a network's layer), an engine fixed at synthesis (``EngineShape``) and a
layer's tiles (``Tiles``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cost_models.fpga_costs import packed_chain
from hetero_dse.errors import HeteroDSEError
from hetero_dse.model.layer_shape import LayerShape

__all__ = ["EngineShape", "NetLayer", "Tiles", "depthwise_taps", "padded", "reads_past"]


@dataclass(frozen=True)
class NetLayer:
    """One layer as the shared kernel runs it. ``C`` and ``K`` are padded to the network's channel block;
    a linear layer is a 1×1 convolution on a 1×1 image (``H = W = R = S = 1``)."""

    engine: str  # "grid" or "depthwise" (the layer pipeline's stages also "maxpool")
    C: int
    K: int
    H: int
    W: int
    R: int
    S: int
    stride: int = 1
    pad: int = 0

    @property
    def OH(self) -> int:
        return (self.H + 2 * self.pad - self.R) // self.stride + 1

    @property
    def OW(self) -> int:
        return (self.W + 2 * self.pad - self.S) // self.stride + 1

    @property
    def macs(self) -> int:
        """Multiply-adds of the padded layer (what the array runs; a max pool's compares are none)."""
        if self.engine == "maxpool":
            return 0
        per_out = self.R * self.S * (1 if self.engine == "depthwise" else self.C)
        return self.K * self.OH * self.OW * per_out


@dataclass(frozen=True)
class EngineShape:
    """An engine fixed at synthesis: its lanes, the DDR word it moves, the rows of its two on-chip buffers (an
    input row is ``in_lanes`` elements, an output row ``out_lanes``: each one wide word) and of the weights a step
    streams (a row ``out_lanes × in_lanes``)."""

    kind: str
    out_lanes: int
    in_lanes: int  # 1 for the depthwise engine
    word: int  # elements a DDR word (one m_axi beat)
    in_rows: int
    w_rows: int  # the most weight rows one step streams (no buffer: the PE array takes them from a FIFO)
    out_rows: int
    distance: int  # the least iterations between two updates of one output element
    #: the epilogue's per-channel parameters a channel (float: its bias; int8: its bias and requantising
    #: multiplier), read per output tile
    params: int = 1
    #: two int8 multiplies of neighbouring output lanes share one DSP48E2 (their activation is the same)
    packed: bool = False
    #: elements a word of the weights' port (0: ``word``): a weight block's rows are whole lane grids, so its
    #: words may be as wide as the port where activations' words are held to the lanes
    wword: int = 0
    #: 32-bit parameters a word of the parameters' port (0: ``word``)
    pword: int = 0
    #: the Winograd engine's output tile m (F(m×m, 3×3)); 0 for the others
    tile: int = 0
    #: the Winograd engine takes its 3×3 layers' weights as the taps (9 lane grids a row, not α²) and transforms a
    #: row as its PE array takes it (int8: integer adds and shifts; float's G needs fabric multiplies, so the host
    #: transforms float weights ahead)
    w_transform: bool = False

    #: the Winograd engine also runs 1×1 stride-1 layers (HybridDNN's second mode): the transforms bypassed, each
    #: of its α² lane grids on one pixel of an α×α block, every grid with the same weights
    pointwise: bool = False
    #: the Winograd engine's output tile, a (group, pixel) a row over ``out_banks`` × ``out_cols`` (``out_rows``: a
    #: patch's sums)
    tile_rows: int = 0
    #: the weights' ports its weight process reads at once, a word from each a cycle (the host deals a layer's
    #: words out to them in turn): where one port's word a cycle starves the PE array of weight rows
    w_ports: int = 1
    #: a float Winograd engine's transforms on DSP cores (fadd/fmul ``fulldsp``, as its PE array's) instead of the
    #: fabric's: DSPs for LUTs, where a board's fabric is short of them (ZCU102)
    transform_dsp: bool = False
    #: the depthwise engine's taps of a window row each lane multiplies a cycle, their products summed by a tree
    #: into the lane's sum (its box in as many banks by column, so that a row's consecutive pixels are read in one
    #: cycle; every depthwise layer's S a multiple of them); 1 on the others
    taps: int = 1
    #: the depthwise engine's window rows each lane multiplies ``taps`` of a cycle (its box in as many banks by row
    #: as well, so that the window's rows are read in one cycle; every depthwise layer's R a multiple of them)
    tap_rows: int = 1

    @property
    def chain(self) -> int:
        """Input lanes a chain of DSPs sums in their post-adders before the fabric's adder tree (packed int8:
        ``packed_chain``, as the layer pipeline's stages; the integer Winograd engine's products, a DSP48E2 each,
        the same way: ``w_transform`` is its int8), 1 where each product enters the tree alone."""
        chained = self.packed or (self.kind == "winograd" and self.w_transform)
        return packed_chain(self.in_lanes) if chained else 1

    @property
    def alpha(self) -> int:
        """The Winograd engine's input patch side (m + 2), 1 for the others (its PE array is α² lane grids)."""
        return self.tile + 2 if self.tile else 1

    def patch_side(self, layer: NetLayer) -> int:
        """The side of the blocks a layer's tiles are made of on this engine: a 3×3 layer's outputs m×m a patch
        (its tiles whole patches), a 1×1 layer's α×α pixels (the Winograd engine; a tile may end in part of a
        block), 1 on the others."""
        if self.kind != "winograd":
            return 1
        return self.alpha if layer.R == 1 else self.tile

    def row_grids(self, R: int) -> int:
        """Lane grids a weight row of the Winograd engine brings over the port for a layer of ``R`` × R taps: α²
        transformed (9 taps where it transforms them itself), one for a 1×1 layer."""
        if R == 1:
            return 1
        return R * R if self.w_transform else self.alpha ** 2

    def row_weights(self, layer: NetLayer) -> int:
        """Weights a weight row of the Winograd engine brings over the port for ``layer`` (``row_grids``)."""
        return self.row_grids(layer.R) * self.out_lanes * self.in_lanes

    def row_words(self, layer: NetLayer) -> int:
        """Words of the weights' port a weight row of ``layer`` takes (``row_elements``; a depthwise row's last
        word padded where its taps end inside it: the explorer's words are powers of two no wider than a lane
        grid, so every other row is whole words)."""
        return -(-self.row_elements(layer) // self.w_word)

    def row_elements(self, layer: NetLayer) -> int:
        """Weights a weight row of ``layer`` holds: a grid's lane grid, the depthwise engine's lanes' ``taps`` (not
        always whole words: the host pads the row at its front), the Winograd engine's ``row_weights``."""
        if self.kind == "winograd":
            return self.row_weights(layer)
        return self.out_lanes * (self.in_lanes if self.kind == "grid" else self.taps * self.tap_rows)

    def tap_steps(self, layer: NetLayer) -> int:
        """The PE array's passes over a layer's window: each tap, or on the depthwise engine each ``taps`` of
        ``tap_rows`` window rows at once."""
        return (layer.R // self.tap_rows) * (layer.S // self.taps)

    @property
    def lane_sums(self) -> int:
        """Products each output lane sums a cycle (its adder tree's inputs): the input lanes, or the depthwise
        engine's ``taps`` of each of its ``tap_rows``."""
        return self.taps * self.tap_rows if self.kind == "depthwise" else self.in_lanes

    @property
    def box_banks(self) -> int:
        """Banks of the depthwise engine's box (box pixel (y, x) in bank (y % tap_rows) * taps + x % taps, row
        (y // tap_rows, x // taps) of its rows): 1 on the grid, whose box is one memory."""
        return self.taps * self.tap_rows if self.kind == "depthwise" else 1

    @property
    def box_latency(self) -> int:
        """Cycles a read of the box's memories takes (its ``BIND_STORAGE``): 2 where each of a depthwise engine's
        taps picks one of nine banks (its whole window a cycle), the memories' output registers taking the read's
        clock-to-out off the path through the 9:1 select to the multiplier (an HLS reviewer's finding: at 1 that
        path is the kernel's likeliest to miss timing); 1 elsewhere. The PE loop is a stage deeper for it."""
        return 2 if self.kind == "depthwise" and self.tap_rows > 1 else 1

    def box_rows(self, box_h: Any, box_w: Any) -> Any:
        """Rows a channel group of a box of ``box_h`` × ``box_w`` pixels takes in each of its banks."""
        if self.kind != "depthwise":
            return box_h * box_w
        return -(-box_h // self.tap_rows) * -(-box_w // self.taps)

    def row_reads(self, layer: NetLayer) -> int:
        """The weight process's iterations a weight row of ``layer`` (a word from each of ``w_ports`` an iteration),
        the row padded at its front to whole iterations (zeros the row register shifts out)."""
        return -(-self.row_words(layer) // self.w_ports)

    @property
    def row_picks(self) -> int:
        """Where the Winograd engine's 3×3 weight row is an iteration of its weight process (a word from each of
        ``w_ports``) or more, but no whole number of them: its rows end to end, each picked out of the row register
        at one of these places in an iteration; 1 where rows are padded to whole iterations (or are whole)."""
        row, per = self.row_grids(3) * self.out_lanes * self.in_lanes, self.w_ports * self.w_word
        return per // math.gcd(row, per) if self.kind == "winograd" and row >= per else 1

    def step_reads(self, layer: NetLayer, rows: Any) -> Any:
        """The weight process's iterations for a step's ``rows`` weight rows of ``layer`` (end to end, the last
        iteration padded, where ``row_picks`` > 1 on a 3×3 layer; else ``row_reads`` each)."""
        if self.row_picks > 1 and layer.R > 1:
            return -(-rows * self.row_weights(layer) // (self.w_ports * self.w_word))
        return rows * self.row_reads(layer)

    @property
    def in_banks(self) -> int:
        """Channel groups of a pixel one activation word brings (the Winograd engine's word may hold several of its
        input lanes' groups: its box is banked by them, a row into each bank a cycle), 1 where a word is a part of
        a group."""
        return max(1, self.word // self.in_lanes) if self.kind == "winograd" else 1

    @property
    def out_banks(self) -> int:
        """Banks of the Winograd engine's output tile (group g in bank g % out_banks): a word's rows (channel groups
        of a pixel), one from each, read in a cycle; 1 where a word is a part of a row."""
        return max(1, self.word // self.out_lanes) if self.kind == "winograd" else 1

    @property
    def out_cols(self) -> int:
        """Banks of each of the Winograd engine's ``out_banks`` by pixel (pixel f of the bank's rows in bank f % m):
        its output transform stores a patch row in a cycle; 1 on the others."""
        return self.tile if self.kind == "winograd" else 1

    def out_stores(self, layer: NetLayer) -> int:
        """Pixels a cycle the Winograd output transform stores: a 3×3 layer's patch row, else one (α-wide blocks)."""
        return self.tile if self.kind == "winograd" and layer.R > 1 else 1

    @property
    def w_word(self) -> int:
        return self.wword or self.word

    @property
    def p_word(self) -> int:
        return self.pword or self.word


@dataclass(frozen=True)
class Tiles:
    """A layer's tiles: output channels (``tk``), input channels (``tc``; the channel tile on the depthwise
    engine), output rows and columns."""

    tk: int
    tc: int
    th: int
    tw: int


def reads_past(layer: NetLayer, tiles: Tiles) -> tuple[int, int, int]:
    """What ``layer`` reads of its input past the image, in pixels: (the halo its padding needs above and to the
    left, the rows and the columns its last tiles read past the image's end). The arena keeps each tensor inside
    the widest of its readers' (``hetero_dse/hls/network_layout``), so a box is read as whole words, unguarded."""
    last_row = (-(-layer.OH // tiles.th) * tiles.th - 1) * layer.stride + layer.R - 1 - layer.pad
    last_col = (-(-layer.OW // tiles.tw) * tiles.tw - 1) * layer.stride + layer.S - 1 - layer.pad
    return layer.pad, max(0, last_row - (layer.H - 1)), max(0, last_col - (layer.W - 1))


def padded(shape: LayerShape, block: int, in_lanes: int) -> tuple[NetLayer, bool]:
    """``shape`` as the kernel runs it for a channel ``block``: (the layer, whether the host gives it im2col)."""
    pad = lambda n: -(-n // block) * block  # noqa: E731
    if shape.engine != "depthwise" and shape.from_host and shape.C < in_lanes and shape.R * shape.S > 1:
        oh = (shape.H + 2 * shape.pad - shape.R) // shape.stride + 1
        ow = (shape.W + 2 * shape.pad - shape.S) // shape.stride + 1
        return NetLayer(shape.engine, pad(shape.C * shape.R * shape.S), pad(shape.K), oh, ow, 1, 1), True
    k = pad(shape.C) if shape.engine == "depthwise" else pad(shape.K)
    c = shape.pixels_in * pad(shape.C // shape.pixels_in)  # each pixel's channels padded, as the layout keeps them
    return NetLayer(shape.engine, c, k, shape.H, shape.W, shape.R, shape.S, shape.stride, shape.pad), False


def depthwise_taps(layers: Sequence[LayerShape], taps: int | None = None, tap_rows: int | None = None
                   ) -> tuple[tuple[int, int], ...]:
    """The depthwise engine's (taps of a window row, window rows) a cycle worth trying for ``layers``: one tap, the
    taps every depthwise layer's width shares, and with those the rows every layer's height shares where the layers'
    windows are as wide as one another (a row's taps its whole row); ``taps`` and ``tap_rows`` fix either. One
    sentence where a fixed count does not divide the windows."""
    widths = [s.S for s in layers if s.engine == "depthwise"]
    heights = [s.R for s in layers if s.engine == "depthwise"]
    shared = math.gcd(*widths) if widths else 1  # a row's taps a cycle must divide every depthwise layer's
    if taps is not None and (taps < 1 or shared % taps and widths):  # (no depthwise layer: no engine to take them)
        raise HeteroDSEError(f"{taps} taps a cycle on the depthwise engine: they must divide the width of each of "
                             f"its layers' windows ({', '.join(map(str, sorted(set(widths))))}), e.g. 1")
    rows = math.gcd(*heights) if heights and len(set(widths)) == 1 and shared > 1 else 1
    if tap_rows is not None and (tap_rows < 1 or tap_rows > 1 and (rows % tap_rows or taps not in (None, shared))):
        raise HeteroDSEError(f"{tap_rows} window rows a cycle on the depthwise engine: they must divide the height "
                             f"of each of its layers' windows ({', '.join(map(str, sorted(set(heights))))}), its "
                             "layers' windows must be as wide as one another, and each row's taps taken at once")
    return tuple((u, r) for u in ((taps,) if taps is not None else sorted({1, shared}))
                 for r in ((tap_rows,) if tap_rows is not None else sorted({1, rows})) if r == 1 or u == shared)
