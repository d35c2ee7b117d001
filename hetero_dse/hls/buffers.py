"""The on-chip buffers of the HLS kernel's read processes, as the Jinja templates print them.

One read process a buffer (the architecture ``cost_models/fpga.py`` scores): each loads a box of its
tensor from DDR into a ``stream_of_blocks`` channel whenever a tile loop it depends on moves. Here Python
works out the box's origin and local index of every dimension, where an element can fall outside the tensor
(only there the template emits a bounds test), the partition, the burst loops of its port words, the first
and last word read (for the port's guard words), and the C of each element's value.
"""

from __future__ import annotations

import re
from typing import Any

from hetero_dse.analysis import Access
from hetero_dse.hls.cexpr import CPrinter, c_type, identifier
from hetero_dse.hls.ports import word_loops
from hetero_dse.hls.tile_loops import TileLoop
from hetero_dse.operator import Operator

__all__ = ["ELEMENT", "buffer_context"]

#: The name of a word's lane in the read processes' element expressions.
ELEMENT = "hdse_elem"


def buffer_context(i: int, access: Access, tensor: Any, info: dict[str, Any], loops: dict[str, TileLoop],
                   ids: dict[str, str], level_of: dict[str, int], op: Operator, te: Any,
                   port: dict[str, Any]) -> dict[str, Any]:
    """One on-chip buffer: its box, partition, where it is (re)loaded and how each element is computed."""
    name = f"buf{i}_{identifier(access.tensor)}"
    dims = [int(w) for w in info["shape"]]
    used = [n for index in access.indices for n in index.loops]
    active = [level_of[n] for n in used if loops[n].trips > 1]
    level = max(active) if active else -1
    shape = [int(d) for d in tensor.shape]

    def origin_max(n: str) -> int:
        """The largest tile origin of loop ``n`` this buffer sees (0 where it is not reloaded along it)."""
        return (loops[n].trips - 1) * loops[n].tile if level_of[n] <= level else 0

    base, local, inside, lowest_start, highest_start = [], [], [], [], []
    for d, index in enumerate(access.indices):
        moving = [(n, c) for n, c in index.terms if level_of[n] <= level and loops[n].trips > 1]
        terms = [f"{c}*o_{ids[n]}" if c != 1 else f"o_{ids[n]}" for n, c in moving]
        shift = sum(c * (loops[n].tile - 1) for n, c in index.terms if c < 0)
        const = index.constant + shift
        base.append(" + ".join(terms + ([str(const)] if const or not terms else [])))
        # the element is inside the tensor for every tile unless the box can cross an edge: emit the test
        # only where it can fail
        lowest = const + sum(c * origin_max(n) for n, c in moving if c < 0)
        highest = const + sum(c * origin_max(n) for n, c in moving if c > 0) + dims[d] - 1
        if lowest < 0:
            inside.append(f"g{d} >= 0")
        if highest >= shape[d]:
            inside.append(f"g{d} < {shape[d]}")
        lowest_start.append(lowest)
        highest_start.append(highest - dims[d] + 1)
        local_terms = [f"{c}*{ids[n]}" if c != 1 else ids[n] for n, c in index.terms]
        offset = -shift
        local.append(" + ".join(local_terms + ([str(offset)] if offset or not local_terms else [])))
    origins = sorted({n for index in access.indices for n, _ in index.terms
                      if level_of[n] <= level and loops[n].trips > 1}, key=lambda n: level_of[n])

    # The element value: the word's lane for an operator input (or a producer the host prepared); for a
    # producer that shifts an input (the padding), its expression around that lane, evaluated on chip.
    source = access.ddr
    coords = [f"g{d}" for d in range(len(dims))]
    if source.host or isinstance(tensor.op, te.PlaceholderOp):
        value = ELEMENT
    else:
        value = CPrinter([(iv.var, c) for iv, c in zip(tensor.op.axis, coords, strict=True)],
                         lambda _load, _printed: ELEMENT)(tensor.op.body[0])
    lead = list(source.lead)
    perm = list(port["perm"])
    xfer = word_loops(dims, info, port, base, lead, perm)
    strides = port["strides"]
    q = xfer["q"]
    first = sum((lowest_start[d] - lead[d]) * strides[at] for at, d in enumerate(perm[:q + 1]))
    last = sum((highest_start[d] - lead[d] + (dims[d] - 1 if at < q else 0)) * strides[at]
               for at, d in enumerate(perm[:q + 1]))
    return {
        "name": name,
        "tensor": access.tensor,
        "port": port,
        "block": f"{name}_t",
        "ctype": c_type(str(tensor.dtype)),
        "dims": dims,
        "partition": [int(f) for f in info["partition"]],
        "storage": info["storage"],
        "level": level,
        "blocks": int(info["blocks"]),
        "origins": [{"id": ids[n], "tile": loops[n].tile} for n in origins],
        "base": base,
        "local_index": local,
        "inside": " && ".join(inside),
        "shape": shape,
        "value": value,
        "access": str(access),
        "xfer": xfer,
        "coords_used": [d for d in range(len(dims)) if re.search(rf"\bg{d}\b", f"{value} {' && '.join(inside)}")],
        # the first and last word any run of any tile reads, for the guard words around the tensor
        "words_read": (first // port["word"], last // port["word"] + xfer["iterations"] - 1),
    }
