"""``python -m hetero_dse``: the same command line as ``hetero_dse``."""

from hetero_dse.cli.main import main

main()
