"""The tiles the network explorer (``fpga_network_design``) tries for each loop of a layer."""

from __future__ import annotations

__all__ = ["tile_options"]


def tile_options(extent: int, lanes: int | None = None, cap: int = 24, multiple: int = 1) -> list[int]:
    """Candidate tiles of a loop: for channels (``lanes`` given) the lane count times powers of two that divide
    the extent, and the extent; for rows and columns every ``ceil(extent / n)`` (a tile that wastes least),
    rounded up to a ``multiple`` (the Winograd engine's tiles are whole patches)."""
    if lanes is not None:  # whole multiples of the lanes that divide the channels (a tile never passes their end)
        out = {lanes * 2 ** i for i in range(12) if lanes * 2 ** i <= extent} | {extent}
        return sorted(v for v in out if v % lanes == 0 and extent % v == 0)
    up = lambda v: -(-v // multiple) * multiple  # noqa: E731
    options = sorted({up(-(-extent // n)) for n in range(1, extent + 1)})
    return options[:cap] + ([up(extent)] if len(options) > cap else [])
