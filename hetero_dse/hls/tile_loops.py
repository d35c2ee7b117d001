"""A loop of the operator's main nest as the HLS generator tiles it, and the C of its index inside a tile.

The context builders of the read processes' buffers, the PE array and the kernel as a whole all read a
loop's extent, tile, unroll factor and kind from the design point; this is that one record, with the tile
trips and the partial last tile the generated guards depend on.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TileLoop", "index_in_tile"]


@dataclass(frozen=True)
class TileLoop:
    """One loop of the main nest at a design point: its extent, tile, unroll factor and kind (spatial or reduce)."""

    name: str
    extent: int
    tile: int
    unroll: int
    kind: str

    @property
    def trips(self) -> int:
        return -(-self.extent // self.tile)

    @property
    def partial(self) -> bool:
        return self.extent % self.tile != 0


def index_in_tile(ident: str, lp: TileLoop) -> str:
    """The C expression of a loop's index inside one tile, from its pipelined and unrolled parts."""
    outer = lp.tile // lp.unroll
    if lp.unroll > 1:
        return f"{ident}_o * {lp.unroll} + {ident}_u" if outer > 1 else f"{ident}_u"
    return f"{ident}_o" if outer > 1 else "0"

