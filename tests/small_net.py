"""A small network for the whole-network FPGA tests (the shared kernel's and the pipeline's): conv on the image,
depthwise, pointwise, a residual block, a leaky ReLU and a linear layer, with batch norms whose statistics fold
into something other than the identity, and two ReLU6s that saturate."""

from __future__ import annotations

import torch
from torch import nn

from hetero_dse.model.chain import trace_chain


class Small(nn.Module):
    """Conv (the image: im2col on the host), depthwise, pointwise, a residual block (ReLU6), leaky ReLU, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16)
        self.dw, self.b2 = nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16)
        self.pw, self.b3 = nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32)
        self.c4, self.b4 = nn.Conv2d(32, 32, 3, 1, 1), nn.BatchNorm2d(32)
        self.c5 = nn.Conv2d(32, 16, 3, 2, 1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = nn.functional.relu6(self.b2(self.dw(x)))
        y = self.b3(self.pw(x))
        x = nn.functional.relu6(self.b4(self.c4(y)) + y)
        x = nn.functional.leaky_relu(self.c5(x), 0.1)
        return self.fc(torch.flatten(x, 1))


class Strided(nn.Module):
    """Conv (the image, 10×10), a depthwise layer of a stride (2: its window's taps on every other pixel; 4: past
    a whole window), pointwise, linear."""

    def __init__(self, stride: int = 2) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.dw, self.b2 = nn.Conv2d(16, 16, 3, stride, 1, groups=16, bias=False), nn.BatchNorm2d(16)
        self.pw = nn.Conv2d(16, 16, 1)
        side = (10 + 2 - 3) // stride + 1
        self.fc = nn.Linear(16 * side * side, 10)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = nn.functional.relu6(self.b2(self.dw(x)))
        return self.fc(torch.flatten(torch.relu(self.pw(x)), 1))


class Clamped(nn.Module):
    """Conv (the image), a 3×3 stride-1 convolution whose ReLU6 saturates with no residual beside it (the write
    loop without one: the Winograd engine's clamp there), linear."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        return self.fc(torch.flatten(nn.functional.relu6(self.b2(self.c2(x))), 1))


class Branched(nn.Module):
    """ResNet's stem and downsampling block, small: a convolution on the image with no activation (its output
    negative in places) into a 3×3 stride-2 max pool padded by one, a block of two 3×3 convolutions beside a 1×1
    stride-2 one (a branch: it reads the pool's output, two stages back), a 2×2 max pool of an odd map, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.conv1, self.bn1 = nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32)
        self.down = nn.Sequential(nn.Conv2d(16, 32, 1, 2, bias=False), nn.BatchNorm2d(32))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(self.b1(self.c1(x)))
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        x = torch.relu(out + self.down(x))
        return self.fc(torch.flatten(nn.functional.max_pool2d(x, 2), 1))


def branched():
    """``Branched``'s layers traced (BN folded), its 12×12 input as an array, the model and its input."""
    torch.manual_seed(0)
    model = Branched().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 3, 12, 12)
    layers, image = trace_chain(model, x)
    return layers, image, model, x


#: a model.py (as ``explore --model`` loads one, dedented by the ``write`` fixture): a convolution on the image, two
#: 8 -> 8 3x3 convolutions (one layer run twice), a pool and a linear layer
TINY_MODEL = """
        import torch

        def model():
            conv = lambda: torch.nn.Conv2d(8, 8, 3, padding=1)
            return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), conv(), torch.nn.ReLU(),
                                       conv(), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                       torch.nn.Linear(8 * 8 * 8, 10))

        def example_input():
            return torch.randn(1, 3, 16, 16)
    """


def traced(strided=0, clamped=False, images=1):
    """The small network's layers traced (BN folded), its input as an array, the model and its input; ``strided``:
    the network of a depthwise layer of that stride (``Strided``) instead; ``clamped``: ``Clamped``'s; ``images``:
    on a batch of that many."""
    torch.manual_seed(0)
    model = (Clamped() if clamped else Strided(strided) if strided else Small()).eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):  # statistics that fold into something other than the identity
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    # the ReLU6s saturate, the depthwise layer's and the residual block's: their clamps at 6 bind (int8's at qhi)
    model.b2.weight.data.mul_(8.0)
    if not strided and not clamped:
        model.b4.bias.data.add_(4.0)  # (shifted, not scaled: its int8 error stays a few steps of the scale)
    side = 10 if strided else 8 if clamped else 16
    x = torch.randn(images, 3, side, side)
    layers, image = trace_chain(model, x)
    return layers, image, model, x


def small_design(dtype="float32", algorithm="direct", board="zcu102", lanes=(4, 8), tile=None, weight_ports=(1, 2),
                 word=None, transform_cores=None, taps=None, strided=0, clamped=False, tap_rows=None, images=1):
    """The small network's kernel as the explorer designs it with these options, and its run through the kernel
    (``NetworkRun``, quantised where int8): (the traced layers, the design, the run, the model, its input);
    ``strided``: the network of a depthwise layer of that stride (``Strided``); ``clamped``: ``Clamped``;
    ``images``: a run of a batch of that many (``batched``, ``per_image``)."""
    from hetero_dse.hardware.board import load_board

    layers, image, model, x = traced(strided, clamped, images)
    design, run = designed_run("small", layers, image, load_board(board), dtype, lanes=lanes, algorithm=algorithm,
                               winograd_tile=tile, weight_ports=weight_ports, word=word,
                               transform_cores=transform_cores, taps=taps, tap_rows=tap_rows)
    return layers, design, run, model, x


def designed_run(name, layers, image, board, dtype, **options):
    """Traced ``layers`` (``trace_chain``) on the batch ``image`` as the explorer designs the network kernel for a
    run of that batch on ``board`` (``options``: ``explore_network``'s), and their run through it (``NetworkRun``,
    quantised where int8, an image's layers once an image: ``per_image``): (the design, the run)."""
    from dataclasses import replace

    from cost_models.fpga_network_design import explore_network
    from cost_models.fpga_network_units import batched
    from hetero_dse.hls.network_run import NetworkRun, RunLayer, per_image, quantized
    from hetero_dse.model.chain import NETWORK_INPUT

    images = image.shape[0]
    design = explore_network(batched([(layer.shape, 1) for layer in layers], images), board, dtype, **options)
    design = replace(design, images=images)

    def tensor(i):
        return None if i is None else ("input:x" if i == NETWORK_INPUT else f"layer:{i}")

    run = NetworkRun(name, [RunLayer(p, layer.weight, layer.bias, tensor(layer.source), tensor(layer.residual),
                                     layer.activation, layer.reference, layer.flatten)
                            for p, layer in zip(design.layers, layers, strict=True)], {"x": image}, "torch")
    return design, per_image(quantized(run, design), images)


def retiled(design, run, column=False):
    """``design`` and its ``run`` (a ``NetworkRun``) on the same hardware, each layer in other tiles, as a run-time
    table may give them: channel tiles of one lane group (several steps and output-channel tiles, each run a
    pixel's channels), and the largest row and column tiles its buffers hold that leave a partial last tile (a tile
    past the map's end), both where whole patches allow, else one. ``column``: instead, input-channel tiles of one
    lane group, every output channel in one tile, and tiles a column wide and as tall as the buffers hold (a box row
    of a 3×3 window three pixels, so a box's first requests wrap to its next row; an output tile more rows than the
    runs in flight, each a row). The kernel is the same but for the arrays sized by the largest tile; the table and
    the trips are the model's for these tiles. Returns (the design, the run)."""
    import itertools
    import math
    from dataclasses import replace

    from cost_models.fpga_network import Tiles, network_trips
    from cost_models.fpga_network_choices import placed_cycles
    from cost_models.fpga_network_placed import PlacedLayer

    def channel(extent, lanes, word):
        step = math.lcm(lanes, word)
        return min(v for v in range(step, extent + 1, step) if extent % v == 0)

    def fits(e, net, tiles):
        rows = network_trips(e, net, tiles)
        return all(rows.get(k, 0) <= getattr(e, k) for k in ("in_rows", "out_rows", "tile_rows") if getattr(e, k))

    timing = {**design.timing, "clock_hz": design.achieved_mhz * 1e6}
    layers = []
    for p in design.layers:
        e, net = design.engines[p.layer.engine], p.layer
        m = e.tile if e.kind == "winograd" and net.R > 1 else 1
        tc = channel(net.C, e.in_lanes if e.kind != "depthwise" else e.out_lanes, e.word)
        tk = channel(net.K, e.out_lanes, e.word) if e.kind != "depthwise" else tc
        # (row, column) tiles: partial both ways first, then one way, the largest first; the explorer's if none fits
        hs, ws = ([v for v in range(extent - 1, 0, -1) if v % m == 0 and extent % v] for extent in (net.OH, net.OW))
        pairs = [*itertools.product(hs, ws), *((h, p.tiles.tw) for h in hs), *((p.tiles.th, w) for w in ws)]
        if column:  # every output channel, a column of the tallest rows that fit
            tk = net.K if e.kind != "depthwise" else tc
            pairs = [(h, m) for h in range(net.OH - net.OH % m or m, 0, -m)]
        th, tw = next(((h, w) for h, w in pairs if fits(e, net, Tiles(tk, tc, h, w))), (p.tiles.th, p.tiles.tw))
        tiles = Tiles(tk, tc, th, tw)
        cycles = placed_cycles(e, net, tiles, p.shape.residual, timing, design.achieved_mhz)
        layers.append(PlacedLayer(p.shape, p.count, net, p.im2col, tiles, cycles))
    return replace(design, layers=layers), replace(run, layers=[replace(r, placed=p)
                                                                for r, p in zip(run.layers, layers, strict=True)])


def three_slr_board():
    """vu9p cut down to three SLRs of 900 DSPs each (630 of them kernels' after the board's usable 70 %): the
    small network's pipeline at its widest lanes (815 DSPs, its 32 × 32 stage 608) spans two as one kernel, and
    fits one kernel an SLR."""
    from dataclasses import replace
    from types import MappingProxyType

    from hetero_dse.hardware.board import load_board

    per = {"dsp": 900, "bram18k": 100, "uram": 0, "lut": 100_000, "ff": 150_000}
    return replace(load_board("vu9p"), name="vu9p-3x900",
                   resources=MappingProxyType({k: 3 * v for k, v in per.items()}),
                   slr_resources=tuple(MappingProxyType(dict(per)) for _ in range(3)))


def with_fifo_depth(project, copy, stream: str, depth: int) -> tuple:
    """A copy of the pipeline ``project`` at ``copy`` with the FIFO ``stream`` declared ``depth`` words deep
    (broken on purpose), and the depth the project declared it."""
    import re
    import shutil

    shutil.copytree(project, copy)
    src = copy / "src" / "kernel.cpp"
    text = src.read_text()
    declared = re.search(rf"hls::stream<(\w+), (\d+)> {stream};", text)
    assert declared, f"no FIFO {stream} is declared in the generated kernel"
    kind, was = declared.groups()
    src.write_text(text.replace(declared.group(0), f"hls::stream<{kind}, {depth}> {stream};"))
    return copy, int(was)
