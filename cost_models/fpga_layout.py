"""Where a read or write process's box lies in the DDR layouts of its tensor, as its transfer walks them.

A tensor may lie in DDR in more than one layout: as the operator has it, or (an input the host transposes, or
the output, which the host transposes back) with one dimension moved innermost. For each layout the batch kernel
(``cost_models.fpga_kernel``) asks ``fpga_blocks.plan_transfer`` how the process walks the box in port words,
and keeps the layout whose transfer takes fewest cycles; these functions give it the box and the tensor in a
layout's order of dimensions, and the steps by which the tile loops move the box (whether every run starts at
the same place in a word depends on them). The kernel inlines them.
"""

from __future__ import annotations

import math

from numba import njit

__all__ = ["box_in_layout", "box_moves", "pad_output_layout"]


@njit(cache=True, inline="always", error_model="numpy")
def box_moves(p, dims, level, entry_start, entry_loop, entry_coef, t, trips, pos, move_step, move_dim):
    """Fills ``move_step`` and ``move_dim`` with the steps by which the tile loops at or above ``level`` (those
    that reload the box) move port ``p``'s box, and the dimension each moves it along; returns how many."""
    # the steps by which the tile loops move the box, per dimension
    n_moves = 0
    for d in range(dims):
        for e in range(entry_start[p, d], entry_start[p, d + 1]):
            lp = entry_loop[e]
            if trips[lp] > 1 and pos[lp] <= level:
                move_step[n_moves] = entry_coef[e] * t[lp]
                move_dim[n_moves] = d
                n_moves += 1
    return n_moves


@njit(cache=True, inline="always", error_model="numpy")
def box_in_layout(p, lay, dims, layout_perm, width, fac, ddr_shape, ddr_strides, wd, fd, dshape, strides, inv):
    """Port ``p``'s box in DDR layout ``lay``'s order of dimensions: fills ``wd`` and ``fd`` (its widths and
    partition factors), ``dshape`` and ``strides`` (the tensor as the layout has it) and ``inv`` (where each
    dimension of the box sits in that order)."""
    for at in range(dims):
        d = layout_perm[p, lay, at]
        wd[at] = width[d]
        fd[at] = fac[d]
        dshape[at] = ddr_shape[p, lay, at]
        strides[at] = ddr_strides[p, lay, at]
        inv[d] = at


@njit(cache=True, inline="always", error_model="numpy")
def pad_output_layout(p, lay, dims, layout_perm, shape, width, word, dshape, strides):
    """The output's DDR layout ``lay`` padded for tiles of ``width``: overwrites ``dshape`` and ``strides``
    (in the layout's order) and returns the row pitch."""
    # the output is laid out in DDR (as the operator has it, or with one dimension moved
    # innermost, which the host undoes after the run) padded to whole tiles along every dimension
    # and its rows to whole words (the host reads the tensor out of that layout), so that a tile
    # that starts on a word boundary writes whole words of its own, and the rows of a partial
    # tile past the tensor land in the padding: every write is unconditional (a burst)
    last = dims - 1
    for at in range(dims):
        d = layout_perm[p, lay, at]
        dshape[at] = math.ceil(shape[p, d] / width[d]) * width[d]
    l_pitch = math.ceil(dshape[last] / word) * word
    dshape[last] = l_pitch
    strides[last] = 1.0
    for at in range(last - 1, -1, -1):
        strides[at] = strides[at + 1] * dshape[at + 1]
    return l_pitch
