"""Targets: one module per kind of device (``fpga``, ``cpu``, ``gpu``) implementing ``base.Target``, and the
one flow that explores an operator for any of them (``flow.explore``)."""
