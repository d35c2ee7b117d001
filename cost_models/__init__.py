"""Analytical FPGA model, I/O lower bounds, learned and roofline cost models."""
