"""Every explorer by name, declared once: how to make it on a space and what ``--help`` says of it. A new search
strategy is one module and one :func:`register_explorer` (its name then works in ``--explorer``, in
``ExplorerSettings`` and in the contract kits); ``auto`` is not an explorer but the rule that picks one
(:func:`hetero_dse.explore.settings.resolve_auto`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hetero_dse.errors import HeteroDSEError
from hetero_dse.explore.base import Explorer

__all__ = ["GGA_POPULATION", "TL_BATCH", "ExplorerEntry", "Make", "explorer_entry", "explorer_names",
           "register_explorer"]

#: ``make(space, seed, starts, gamma, prior)``: the explorer on ``space``; ``starts`` is the user's or the
#: target's start points per round (None: the explorer's own default), ``prior`` the history's related
#: workloads (None: none)
Make = Callable[[Any, int, "int | None", float, Any], Explorer]


@dataclass(frozen=True)
class ExplorerEntry:
    name: str
    make: Make
    summary: str  # one clause for --help
    #: enumerates the space: only spaces that can be listed (FPGA), never measured trials one by one
    enumerates: bool = False
    #: learns from the history's related workloads (the search loads them for it)
    uses_history: bool = False


_REGISTRY: dict[str, ExplorerEntry] = {}
#: the history-based tuners' rounds: the guided GA's population (seed 002: "P=16 is sufficient"), transfer
#: learning's measurements per fit
GGA_POPULATION, TL_BATCH = 16, 8


def register_explorer(name: str, make: Make, summary: str, *, enumerates: bool = False,
                      uses_history: bool = False) -> None:
    """Declare an explorer (a name registered again is replaced: a plugin may override a built-in)."""
    if not name.isidentifier() or name == "auto":
        raise ValueError(f"an explorer's name is a word other than 'auto', got {name!r}")
    _REGISTRY[name] = ExplorerEntry(name, make, summary, enumerates, uses_history)


def explorer_names() -> tuple[str, ...]:
    """``auto`` and every registered explorer, in the order they were declared."""
    return ("auto", *_REGISTRY)


def explorer_entry(name: str) -> ExplorerEntry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise HeteroDSEError(f"unknown explorer {name!r}; choose one of {', '.join(explorer_names())}") from None


# ------------------------------------------------------------------------------------------ built-ins
def _exhaustive(space, seed, starts, gamma, prior):
    from hetero_dse.explore.exhaustive import Exhaustive
    from hetero_dse.space.base import Enumerable

    if not isinstance(space, Enumerable):
        walkers = [n for n in explorer_names()[1:] if not _REGISTRY[n].enumerates]
        raise HeteroDSEError("the exhaustive explorer needs a space that can be enumerated (FPGA); choose "
                             + ", ".join(walkers))
    return Exhaustive(space)


def _q(space, seed, starts, gamma, prior):
    from hetero_dse.explore.qlearning import QMethod  # imports torch

    return QMethod(space, seed=seed, starts=starts or 8, gamma=gamma)


def _p(space, seed, starts, gamma, prior):
    from hetero_dse.explore.directional import PMethod

    return PMethod(space, seed=seed, starts=starts or 8, gamma=gamma)


def _sa(space, seed, starts, gamma, prior):
    from hetero_dse.explore.annealing import SimulatedAnnealing

    return SimulatedAnnealing(space, seed=seed, chains=starts or 512, gamma=gamma)


def _random(space, seed, starts, gamma, prior):
    from hetero_dse.explore.directional import RandomSearch

    return RandomSearch(space, seed=seed, batch=starts or 64)


def _gga(space, seed, starts, gamma, prior):
    import numpy as np

    from hetero_dse.explore.base import default_points
    from hetero_dse.explore.gga import GuidedGA

    population = starts or GGA_POPULATION
    # the engineer's schedules first, as every other explorer's first round measures them, then the history's
    # best-ranked points; the rest are expertise mutations of them (without either, the paper's random points)
    rows = [space.encode(p) for p in default_points(space)]
    if prior is not None:
        rows += list(prior.candidates(space, population))
    candidates = np.array(rows, dtype=np.int64).reshape(-1, space.num_knobs)
    _, first = np.unique(space.keys(candidates) if rows else np.empty(0, np.int64), return_index=True)
    return GuidedGA(space, seed=seed, candidates=candidates[np.sort(first)][:population], population=population)


def _ga(space, seed, starts, gamma, prior):
    from hetero_dse.explore.genetic import GASettings, GeneticAlgorithm

    return GeneticAlgorithm(space, seed=seed, settings=GASettings(population=starts or GASettings.population))


def _ppo(space, seed, starts, gamma, prior):
    from hetero_dse.explore.ppo import PPO, PPOSettings  # imports torch

    return PPO(space, seed=seed, settings=PPOSettings(walkers=starts or PPOSettings.walkers, start_gamma=gamma))


def _tl(space, seed, starts, gamma, prior):
    from hetero_dse.explore.transfer import TransferLearning  # imports xgboost

    return TransferLearning(space, seed=seed, prior=prior, batch=starts or TL_BATCH)


register_explorer("exhaustive", _exhaustive, "every valid point (FPGA spaces)", enumerates=True)
register_explorer("q", _q, "FlexTensor's Q-learning walk")
register_explorer("p", _p, "every direction from each start point")
register_explorer("sa", _sa, "simulated annealing")
register_explorer("random", _random, "sampling")
register_explorer("gga", _gga, "guided GA seeded from the history", uses_history=True)
register_explorer("ga", _ga, "a plain genetic algorithm (seed 004): tournaments, crossover per knob, mutation "
                              "as a neighbour move, elitism")
register_explorer("ppo", _ppo, "reinforcement learning of the moves by PPO (seed 004), its policy kept with "
                                "--q-state")
register_explorer("tl", _tl, "XGBoost cost model trained on the filtered history and this run's measurements",
                  uses_history=True)
