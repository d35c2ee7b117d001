"""The ``hetero_dse`` command line."""
