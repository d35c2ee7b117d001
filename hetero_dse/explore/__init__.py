"""Explorers: batch ask/tell strategies over an encoded design space, and the search loop that drives them."""

from hetero_dse.explore.annealing import SimulatedAnnealing
from hetero_dse.explore.base import Explorer
from hetero_dse.explore.exhaustive import Exhaustive
from hetero_dse.explore.search import SearchResult, make_explorer, search

__all__ = ["Exhaustive", "Explorer", "SearchResult", "SimulatedAnnealing", "make_explorer", "search"]
