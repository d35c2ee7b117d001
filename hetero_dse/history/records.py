"""What the history database keeps: workloads (what was tuned, where) and records (one evaluated point each).

Both are plain values with ``to_json``/``from_json``, so the database, the JSON-lines export and the tuners
share one form.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from hetero_dse.space.point import OPTIONAL_KNOBS, Point


@dataclass(frozen=True)
class Workload:
    """An operator on a target: the signature (name, every tensor's shape and dtype, the parameters), the
    target (``llvm -mcpu=…``, ``cuda …``, a board) and the versions of the tools that produced the numbers."""

    operator: str
    signature: str
    target: str
    versions: dict[str, str] = field(default_factory=dict)
    #: what the history-based tuners compare workloads by, not part of the key: the main node's loops
    #: ``{"loops": {name: extent}, "flops": n}`` (see :func:`workload_spec`)
    spec: dict[str, Any] = field(default_factory=dict)

    @property
    def extents(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in (self.spec.get("loops") or {}).items()}

    @property
    def flops(self) -> float | None:
        flops = self.spec.get("flops")
        return float(flops) if flops else None

    @property
    def key(self) -> str:
        """Stable identity: records of two workloads with the same key are interchangeable."""
        text = json.dumps([self.signature, self.target, sorted(self.versions.items())])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Workload:
        return cls(data["operator"], data["signature"], data["target"], dict(data.get("versions") or {}),
                   dict(data.get("spec") or {}))


def workload_spec(analysis) -> dict[str, Any]:
    """The spec of an analysed operator: its main node's loop extents, in loop order, and its FLOPs."""
    return {"loops": {lp.name: int(lp.extent) for lp in analysis.main.loops}, "flops": int(analysis.flops)}


@dataclass(frozen=True)
class Record:
    """One evaluated point: its performance (seconds per run, or the model's objective; lower is better), or
    the error that kept it from having one."""

    point: Point
    seconds: float | None
    error: str | None = None
    source: str = ""      # the explorer (q, sa, gga…) or "import"
    timestamp: float = field(default_factory=time.time)
    #: how the time was taken: its repeats and the foreign load (``loaded`` true: not to be reused); None
    #: for a model's figure or a record from before conditions were kept
    conditions: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds is not None

    @property
    def loaded(self) -> bool:
        """Timed while other work loaded the machine: not an answer a search may reuse."""
        return bool((self.conditions or {}).get("loaded"))

    @property
    def point_key(self) -> str:
        return point_key(self.point)

    def to_json(self) -> dict[str, Any]:
        return {"point": self.point.to_json(), "seconds": self.seconds, "error": self.error, "source": self.source,
                "timestamp": self.timestamp, "conditions": self.conditions}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        conditions = data.get("conditions")
        return cls(Point.from_json(data["point"]), data.get("seconds"), data.get("error"), data.get("source", ""),
                   float(data.get("timestamp", time.time())), dict(conditions) if conditions else None)


def point_key(point: Point) -> str:
    """The same text for the same point, whatever produced it and in whatever order its knobs come (a space
    lists them in its own order; an export, jq -S or PostgreSQL's jsonb sorts them)."""
    # a knob at the value that means leaving it out (OPTIONAL_KNOBS) is left out: the same kernel, the same key
    knobs = {k: v for k, v in point.to_json().items() if k not in OPTIONAL_KNOBS or v != OPTIONAL_KNOBS[k]}
    return hashlib.sha256(json.dumps(knobs, sort_keys=True).encode()).hexdigest()[:32]


def unsorted_point_key(point: Point) -> str:
    """The key of databases written before keys were independent of the knobs' order (to migrate them)."""
    return hashlib.sha256(point.dumps().encode()).hexdigest()[:32]
