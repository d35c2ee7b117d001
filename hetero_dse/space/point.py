"""A design point: an immutable, hashable, ordered mapping of knob name to value, JSON in and out."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


#: knobs a point may leave out, with the value leaving it out means: a knob added to a space after points were
#: recorded (the CPU's ``block``), so that those points, their history and their schedule.json stay what they were
OPTIONAL_KNOBS: dict[str, Any] = {"block": 0}


class Point(Mapping[str, Any]):
    """Knob name -> value; values are ints, floats, strings or tuples of them (lists in JSON)."""

    __slots__ = ("_items", "_hash")

    def __init__(self, knobs: Mapping[str, Any] | None = None, **more: Any) -> None:
        merged = {**(knobs or {}), **more}
        self._items = tuple((k, _freeze(v)) for k, v in merged.items())
        self._hash = hash(self._items)

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and self._items == other._items

    def __repr__(self) -> str:
        return f"Point({', '.join(f'{k}={v!r}' for k, v in self._items)})"

    def replace(self, **changes: Any) -> Point:
        return Point({**dict(self._items), **changes})

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self._items}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Point:
        return cls(json.loads(data) if isinstance(data, str) else data)


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value
