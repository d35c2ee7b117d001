"""Contract kits: what every space, explorer and history backend of hetero_dse must satisfy, as functions a
test (ours, or that of a new space or explorer) calls (``contracts.py``)."""
