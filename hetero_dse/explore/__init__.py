"""Explorers: batch ask/tell strategies over an encoded design space, and the search loop that drives them."""

from hetero_dse.explore.annealing import SimulatedAnnealing
from hetero_dse.explore.base import Explorer
from hetero_dse.explore.directional import PMethod, RandomSearch
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.explore.registry import explorer_names, register_explorer
from hetero_dse.explore.settings import make_explorer

__all__ = ["Exhaustive", "Explorer", "PMethod", "RandomSearch", "SimulatedAnnealing", "explorer_names", "make_explorer",
           "register_explorer"]
